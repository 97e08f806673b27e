package bedrock

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime/types"
	"github.com/aws/smithy-go"

	"github.com/buzzgate/buzzgate/pkg/llm"
	"github.com/buzzgate/buzzgate/pkg/provider/upstream"
	"github.com/buzzgate/buzzgate/pkg/wire/converse"
	"github.com/buzzgate/buzzgate/pkg/wire/messages"
)

// AnthropicVersion is the anthropic_version a Messages body carries on
// Bedrock, in place of the anthropic-version header.
const AnthropicVersion = "bedrock-2023-05-31"

// IsClaude reports whether a Bedrock model id (a foundation model, a
// cross-region inference profile such as "us.anthropic.claude-...", or the
// ARN of either) is an Anthropic Claude model, which takes the Messages API
// through InvokeModel.
func IsClaude(model string) bool {
	if i := strings.LastIndexByte(model, '/'); i >= 0 {
		model = model[i+1:] // an ARN: ...:foundation-model/<id>, ...:inference-profile/<id>
	}
	return strings.HasPrefix(model, "anthropic.claude") || strings.Contains(model, ".anthropic.claude")
}

// ClaudeTransport carries an anthropic adapter's Messages calls to Claude
// on Bedrock (it is an anthropic.Transport): each is an
// InvokeModelWithResponseStream of the call's model with its body, less
// "model" and "stream", plus anthropic_version, and the anthropic-beta
// header's values as anthropic_beta. Its answer's events are the
// Anthropic events Bedrock sends, unwrapped from its event stream byte
// for byte. Bedrock's failures are classified by their exception
// (classify); an exception inside the stream ends it with the error an
// Anthropic error event would.
type ClaudeTransport struct {
	Runtime *bedrockruntime.Client
}

// Open sends call.
func (t ClaudeTransport) Open(ctx context.Context, call upstream.Call) (upstream.Events, error) {
	if call.Model == "" {
		return nil, converse.Refuse("the request has no model")
	}
	set := map[string][]byte{"model": nil, "stream": nil, "anthropic_version": []byte(strconv.Quote(AnthropicVersion))}
	var betas []string
	for _, v := range call.Header.Values(messages.HeaderBeta) {
		for b := range strings.SplitSeq(v, ",") {
			if b = strings.TrimSpace(b); b != "" {
				betas = append(betas, b)
			}
		}
	}
	if len(betas) > 0 {
		set["anthropic_beta"], _ = json.Marshal(betas)
	}
	body, err := llm.SetTopLevel(bytes.Join(call.Body, nil), set)
	if err != nil {
		return nil, converse.Refuse("the request body is not a JSON object")
	}
	out, err := t.Runtime.InvokeModelWithResponseStream(ctx, &bedrockruntime.InvokeModelWithResponseStreamInput{
		ModelId:     aws.String(call.Model),
		Body:        body,
		ContentType: aws.String("application/json"),
		Accept:      aws.String("application/json"),
	}, ownStream)
	if err != nil {
		return nil, classify(ctx, err)
	}
	return &claudeEvents{ctx: ctx, es: out.GetStream()}, nil
}

// claudeEvents is an InvokeModelWithResponseStream answer: each chunk's
// payload is one Anthropic event, named by its type.
type claudeEvents struct {
	ctx context.Context
	es  *bedrockruntime.InvokeModelWithResponseStreamEventStream
}

// Next returns the next chunk's event: io.EOF after a clean end, the
// context's error once it ended, llm.ErrStreamCut or a FailTransient
// *llm.ProviderError for a broken stream, and for an exception the
// FailTransient *llm.ProviderError of an Anthropic error event of
// Bedrock's words ("ModelStreamErrorException: ...").
func (e *claudeEvents) Next() (upstream.Event, error) {
	for {
		select {
		case ev, ok := <-e.es.Events():
			if !ok {
				return upstream.Event{}, e.end()
			}
			chunk, ok := ev.(*types.ResponseStreamMemberChunk)
			if !ok {
				continue // a member this code does not know: skipped, as SSE skips unknown fields
			}
			data := chunk.Value.Bytes
			var head struct {
				Type string `json:"type"`
			}
			_ = json.Unmarshal(data, &head)
			if strings.ContainsAny(head.Type, "\r\n") {
				head.Type = "" // no SSE event name
			}
			return upstream.Event{Name: head.Type, Data: data}, nil
		case <-e.ctx.Done():
			return upstream.Event{}, upstream.ContextError("bedrock", e.ctx)
		}
	}
}

// end is the error of the events' end.
func (e *claudeEvents) end() error {
	err := e.es.Err()
	if err == nil {
		return io.EOF
	}
	var apiErr smithy.APIError
	if !errors.As(err, &apiErr) {
		return upstream.ReadError("bedrock", e.ctx, false, nil, err) // the connection broke
	}
	_, msg := Status(err)
	if msg == "" {
		msg = "unspecified upstream error"
	}
	return &llm.ProviderError{Class: llm.FailTransient, Message: msg, Err: &llm.ChunkError{Message: msg}}
}

// Release implements upstream.Events: the SDK holds nothing to give back.
func (e *claudeEvents) Release() {}

// Close ends the call.
func (e *claudeEvents) Close() error { return e.es.Close() }
