// Package bedrock is the adapter of an api: bedrock provider, AWS Bedrock
// Runtime, through the AWS SDK for Go v2 (github.com/aws/aws-sdk-go-v2/
// service/bedrockruntime). Calls are signed with the SDK's default
// credential chain (the function's role under Lambda; the environment or a
// profile locally); there is no API key.
//
// A Claude model (IsClaude) speaks Anthropic Messages: a Messages client's
// request passes through as on an anthropic provider, and every other is
// translated as for one, by an anthropic adapter whose transport is
// ClaudeTransport (InvokeModelWithResponseStream). Every other model goes
// through ConverseStream: a Messages client's request translated directly
// (pkg/wire/messages), its answer as Messages events; any other from Chat
// Completions (pkg/wire/converse), its answer as chunks. This package is
// the transport: the SDK's client, credentials and signing, the event
// streams, and the classification of Bedrock's exceptions.
//
// The SDK's own retries are off: the router alone decides what is called
// again. Bedrock's failures are classified by their exception
// (failureClass): throttling is throttled, a validation error the
// provider's refusal of the request, a missing model, access to it or the
// credentials a configuration error.
package bedrock

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime/schemas"
	"github.com/aws/smithy-go/transport/http/protocol/restjson1"

	"github.com/buzzgate/buzzgate/pkg/llm"
)

// NewRuntime is a Bedrock Runtime client for region, with cfg's credentials
// (the SDK's default chain, loaded once for every bedrock provider);
// endpoint, when not empty, in place of the region's; no retries. Calls go
// through hc when not nil, else through cfg's client (the SDK's own, which
// honours AWS_CA_BUNDLE and the proxy variables).
func NewRuntime(cfg aws.Config, region, endpoint string, hc *http.Client) *bedrockruntime.Client {
	return bedrockruntime.NewFromConfig(cfg, func(o *bedrockruntime.Options) {
		o.Region = region
		o.Retryer = aws.NopRetryer{}
		if endpoint != "" {
			o.BaseEndpoint = aws.String(endpoint)
		}
		if hc != nil {
			o.HTTPClient = hc
		}
		o.HTTPClient = ownBody{o.HTTPClient}
	})
}

// ownBody gives each request a body of its own, for the transport alone.
// Under load, about one stream in 300 broke a few events in with "use of
// closed network connection": net/http's write loop, which reads a request
// body once more after sending it (to see its end), failed while the SDK
// still held that body, and closed the connection that carried the answer.
// With a body only net/http reads, it does not happen. A request body is
// the prompt, already in memory: the copy costs one buffer.
type ownBody struct{ next bedrockruntime.HTTPClient }

func (c ownBody) Do(req *http.Request) (*http.Response, error) {
	if req.Body != nil && req.Body != http.NoBody {
		b, err := io.ReadAll(req.Body)
		req.Body.Close()
		if err != nil {
			return nil, err
		}
		req.Body = io.NopCloser(bytes.NewReader(b))
		req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }
	}
	return c.next.Do(req)
}

// Client is an api: bedrock provider.
type Client struct {
	name    string
	runtime *bedrockruntime.Client
	claude  llm.Provider
	now     func() time.Time
}

// New is the provider called name: Claude models through claude (an
// anthropic adapter over ClaudeTransport{runtime}: anthropic.NewOver), the
// others through runtime's ConverseStream.
func New(name string, runtime *bedrockruntime.Client, claude llm.Provider) *Client {
	return &Client{name: name, runtime: runtime, claude: claude, now: time.Now}
}

// Name is the provider's name.
func (c *Client) Name() string { return c.name }

// Caps: the native protocol is Messages, for every model: a Claude model
// takes a Messages request as Anthropic's API does; any other takes it
// translated to Converse directly (messages.ToConverse), so that a
// Messages client's cache points and thinking survive. Requests of the
// other client APIs come as Chat Completions. It sets no output limit of
// its own and cannot count tokens.
func (c *Client) Caps() llm.Caps { return llm.Caps{Native: llm.ProtoMessages} }

// ChatStream calls req.Model: a Claude model through the Messages adapter;
// any other through ConverseStream, from a Messages body or a Chat
// Completions one.
func (c *Client) ChatStream(ctx context.Context, req *llm.UpstreamRequest) (llm.ChunkStream, error) {
	if IsClaude(req.Model) {
		return c.claude.ChatStream(ctx, req)
	}
	if req.Proto == llm.ProtoMessages {
		return c.messagesStream(ctx, req)
	}
	return c.converseStream(ctx, req)
}

// ownStream gives one streaming call a protocol of its own. The SDK's
// client holds one event-stream codec for all its calls, and that codec
// keeps scratch state that every open stream's reader writes without a
// lock (github.com/aws/smithy-go issue 714): two overlapping streams on one
// client are a data race.
func ownStream(o *bedrockruntime.Options) {
	o.Protocol = restjson1.New(schemas.AmazonBedrockFrontendService)
}
