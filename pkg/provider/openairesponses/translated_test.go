package openairesponses_test

import (
	"encoding/json"
	"io"
	"reflect"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/buzzgate/buzzgate/pkg/llm"
	"github.com/buzzgate/buzzgate/pkg/provider/openairesponses"
	"github.com/buzzgate/buzzgate/pkg/providertest"
)

// TestTranslatedAgainstFake: a Chat Completions request to the fake
// Responses upstream, streamed and not: the request it receives, and the
// chunks its answer becomes.
func TestTranslatedAgainstFake(t *testing.T) {
	reasoning := &providertest.ResponsesAnswer{Reasoning: []string{"Step one.", "Step two."}, EncryptedContent: "gAAA", CachedTokens: 6, ReasoningTokens: 9}
	for _, whole := range []bool{false, true} {
		name := "streamed"
		if whole {
			name = "JSON"
		}
		t.Run(name, func(t *testing.T) {
			up := providertest.NewResponses(t)
			up.SetDefault(providertest.Response{Text: []string{"Blue", "."}, Usage: &providertest.Usage{PromptTokens: 30, CompletionTokens: 12}, Responses: reasoning, NonStreaming: whole})
			s := open(t, openairesponses.New("resp", up.URL(), "sk", nil), t.Context(), &llm.UpstreamRequest{Model: "gpt-route", Body: []byte(chatBody(`"reasoning_effort":"low"`))})
			chunks, err := collect(t, s)
			if err != io.EOF {
				t.Fatalf("end %v", err)
			}
			var content, reasoningText []string
			var finish string
			for _, c := range chunks {
				var w struct {
					ID      string
					Choices []struct {
						Delta struct {
							Content          *string
							ReasoningContent *string `json:"reasoning_content"`
						}
						FinishReason *string `json:"finish_reason"`
					}
				}
				if err := json.Unmarshal(c.Raw, &w); err != nil {
					t.Fatal(err)
				}
				if w.ID != "resp_1" {
					t.Errorf("chunk %s: id %q, want the Response's", c.Raw, w.ID)
				}
				for _, ch := range w.Choices {
					if d := ch.Delta.Content; d != nil && *d != "" {
						content = append(content, *d)
					}
					if d := ch.Delta.ReasoningContent; d != nil {
						reasoningText = append(reasoningText, *d)
					}
					if ch.FinishReason != nil {
						finish = *ch.FinishReason
					}
				}
			}
			wantContent, wantReasoning := []string{"Blue", "."}, []string{"Step one.", "\n\nStep two."}
			if whole {
				wantContent = []string{"Blue."}
			}
			if diff := cmp.Diff(wantContent, content); diff != "" {
				t.Errorf("content (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(wantReasoning, reasoningText); diff != "" {
				t.Errorf("reasoning (-want +got):\n%s", diff)
			}
			last := chunks[len(chunks)-1]
			if finish != "stop" || last.HasChoices || !reflect.DeepEqual(last.Usage, llm.ReadUsage([]byte(`{"prompt_tokens":30,"completion_tokens":12,"total_tokens":42,"prompt_tokens_details":{"cached_tokens":6},"completion_tokens_details":{"reasoning_tokens":9}}`))) {
				t.Errorf("finish %q, last chunk %s", finish, last.Raw)
			}
			got := up.Requests()[0]
			if got.JSON["model"] != "gpt-route" || got.JSON["store"] != false || got.JSON["stream"] != true ||
				!strings.Contains(string(got.Body), `"reasoning":{"effort":"low"}`) || got.Header.Get("Authorization") != "Bearer sk" {
				t.Errorf("the upstream received %s with %v", got.Body, got.Header)
			}
		})
	}
}

// TestTranslatedFinishes: how a Responses answer ends reaches a Chat
// Completions client as its finish_reason.
func TestTranslatedFinishes(t *testing.T) {
	for _, tt := range []struct {
		resp providertest.Response
		want string
	}{
		{providertest.Response{}, "stop"},
		{providertest.Response{FinishReason: "length"}, "length"},
		{providertest.Response{FinishReason: "content_filter"}, "content_filter"},
		{providertest.Response{ToolCall: &providertest.ToolCall{ID: "call_x", Name: "f", Arguments: `{"a":"é"}`}}, "tool_calls"},
	} {
		up := providertest.NewResponses(t)
		up.SetDefault(tt.resp)
		s := open(t, openairesponses.New("resp", up.URL(), "sk", nil), t.Context(), &llm.UpstreamRequest{Model: "m", Body: []byte(chatBody(""))})
		chunks, err := collect(t, s)
		if err != io.EOF {
			t.Fatalf("end %v", err)
		}
		var a llm.Assembler
		for i := range chunks {
			if err := a.AddChunk(&chunks[i]); err != nil {
				t.Fatal(err)
			}
		}
		b, err := a.Completion(llm.Usage{}, "")
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), `"finish_reason":"`+tt.want+`"`) {
			t.Errorf("%+v: completion %s, want finish_reason %s", tt.resp, b, tt.want)
		}
		if tt.resp.ToolCall != nil && !strings.Contains(string(b), `"tool_calls":[{"id":"call_x","type":"function","function":{"name":"f","arguments":"{\"a\":\"é\"}"}}]`) {
			t.Errorf("completion %s: want the tool call", b)
		}
	}
}
