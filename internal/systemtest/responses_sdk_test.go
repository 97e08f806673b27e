package systemtest_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/buzzgate/buzzgate/pkg/providertest"
)

func responsesParams(input string) responses.ResponseNewParams {
	return responses.ResponseNewParams{
		Model:        "m",
		Input:        responses.ResponseNewParamsInputUnion{OfString: openai.String(input)},
		Instructions: openai.String("Be brief."),
	}
}

// TestResponsesSDK drives POST /api/v1/responses with the official openai-go
// SDK: a response and its cost, a stream, previous_response_id continued on
// ANOTHER instance sharing the store (memory: the same store object; and
// DynamoDB on dynalite), GET /api/v1/responses/{id} for its own project
// only, an unknown previous_response_id, and a replay with Idempotency-Key.
func TestResponsesSDK(t *testing.T) {
	for _, sk := range storeKinds {
		t.Run(sk.name, func(t *testing.T) {
			store := sk.new(t)
			g := newGateway(t, setup{store: store})
			second := g.instance(t, store)
			ctx := context.Background()
			client := sdkClient(g)

			r, err := client.Responses.New(ctx, responsesParams("Say hello"))
			if err != nil {
				t.Fatal(err)
			}
			if r.Status != "completed" || r.OutputText() != "Hello world" || !strings.HasPrefix(r.ID, "resp_") || r.Usage.OutputTokens != 2 ||
				!strings.Contains(r.RawJSON(), `"cost":`) {
				t.Fatalf("response: %s", r.RawJSON())
			}
			up := g.ups[0].Requests()[0].JSON["messages"].([]any)
			if len(up) != 2 || up[0].(map[string]any)["role"] != "system" {
				t.Errorf("upstream messages: %v", up)
			}

			// The next turn, on the other instance: the upstream sees the
			// whole conversation (the new instructions, not the old ones).
			next := responsesParams("And again")
			next.PreviousResponseID = openai.String(r.ID)
			c2 := openai.NewClient(option.WithBaseURL(second+"/api/v1/"), option.WithAPIKey(testKey), option.WithMaxRetries(0))
			r2, err := c2.Responses.New(ctx, next)
			if err != nil {
				t.Fatal(err)
			}
			msgs := g.ups[0].Requests()[1].JSON["messages"].([]any)
			var roles []string
			for _, m := range msgs {
				roles = append(roles, m.(map[string]any)["role"].(string))
			}
			if strings.Join(roles, ",") != "system,user,assistant,user" || r2.PreviousResponseID != r.ID {
				t.Errorf("continued conversation roles %v, previous %q", roles, r2.PreviousResponseID)
			}

			got, err := c2.Responses.Get(ctx, r.ID, responses.ResponseGetParams{})
			if err != nil || got.ID != r.ID || got.OutputText() != "Hello world" {
				t.Errorf("GET its own response: %v %v", got, err)
			}
			other := openai.NewClient(option.WithBaseURL(g.url+"/api/v1/"), option.WithAPIKey(otherProjectKey), option.WithMaxRetries(0))
			_, err = other.Responses.Get(ctx, r.ID, responses.ResponseGetParams{})
			var apiErr *openai.Error
			if !errors.As(err, &apiErr) || apiErr.StatusCode != 404 {
				t.Errorf("GET another project's response: %v", err)
			}
			unknown := responsesParams("x")
			unknown.PreviousResponseID = openai.String("resp_unknown")
			_, err = client.Responses.New(ctx, unknown)
			if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || apiErr.Param != "previous_response_id" {
				t.Errorf("an unknown previous_response_id: %v", err)
			}

			stream := client.Responses.NewStreaming(ctx, responsesParams("Stream it"))
			defer stream.Close()
			var text strings.Builder
			var completed *responses.Response
			for stream.Next() {
				ev := stream.Current()
				switch ev.Type {
				case "response.output_text.delta":
					text.WriteString(ev.Delta)
				case "response.completed":
					resp := ev.Response
					completed = &resp
				}
			}
			if err := stream.Err(); err != nil || text.String() != "Hello world" || completed == nil || completed.Usage.OutputTokens != 2 {
				t.Errorf("stream: %q, completed %v, err %v", text.String(), completed != nil, err)
			}

			calls := g.ups[0].Calls()
			idem := option.WithHeader("Idempotency-Key", key(t))
			a, err := client.Responses.New(ctx, responsesParams("Once"), idem)
			if err != nil {
				t.Fatal(err)
			}
			b, err := client.Responses.New(ctx, responsesParams("Once"), idem)
			if err != nil || a.RawJSON() != b.RawJSON() || g.ups[0].Calls() != calls+1 {
				t.Errorf("replay: same %v, upstream calls %d, want %d (%v)", a.RawJSON() == b.RawJSON(), g.ups[0].Calls(), calls+1, err)
			}
		})
	}
}

// TestResponsesSDKCases: through openai-go, a tool call comes back as a
// function_call item, a refusal as a refusal part, a failure after output as
// a response.failed event, and a changed body with the same key as a 409.
func TestResponsesSDKCases(t *testing.T) {
	g := newGateway(t, setup{})
	client := sdkClient(g)
	ctx := context.Background()

	g.ups[0].Script(providertest.Response{ToolCall: &providertest.ToolCall{ID: "call_1", Name: "get_weather", Arguments: `{"city":"Paris"}`}})
	p := responsesParams("Weather?")
	p.Tools = []responses.ToolUnionParam{{OfFunction: &responses.FunctionToolParam{Name: "get_weather", Parameters: map[string]any{"type": "object"}}}}
	r, err := client.Responses.New(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Output) != 1 || r.Output[0].Type != "function_call" || r.Output[0].Name != "get_weather" || r.Output[0].Arguments.OfString != `{"city":"Paris"}` || r.Output[0].CallID != "call_1" {
		t.Errorf("tool call: %s", r.RawJSON())
	}

	g.ups[0].Script(providertest.Response{Refusal: "I can't help with that."})
	r, err = client.Responses.New(ctx, responsesParams("Something bad"))
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Output) != 1 || len(r.Output[0].Content) != 1 || r.Output[0].Content[0].Type != "refusal" || r.Output[0].Content[0].Refusal != "I can't help with that." {
		t.Errorf("refusal: %s", r.RawJSON())
	}

	g.ups[0].Script(providertest.Response{Text: []string{"a", "b", "c"}, Cut: &providertest.Cut{After: 2, How: providertest.CutError}})
	stream := client.Responses.NewStreaming(ctx, responsesParams("Stream it"))
	defer stream.Close()
	var last string
	for stream.Next() {
		last = stream.Current().Type
	}
	if err := stream.Err(); err != nil || last != "response.failed" {
		t.Errorf("a failure after output: last event %q, err %v; want response.failed", last, err)
	}

	idem := option.WithHeader("Idempotency-Key", key(t))
	if _, err := client.Responses.New(ctx, responsesParams("Once"), idem); err != nil {
		t.Fatal(err)
	}
	_, err = client.Responses.New(ctx, responsesParams("Twice"), idem)
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 409 || apiErr.Code != "idempotency_conflict" {
		t.Errorf("a changed body with the same key: %v", err)
	}
}
