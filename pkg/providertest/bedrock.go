package providertest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	ssestream "github.com/buzzgate/buzzgate/pkg/sse"
	"github.com/buzzgate/buzzgate/pkg/wire/converse"
	"github.com/buzzgate/buzzgate/pkg/wire/messages"
)

// The credentials and region a server made by NewBedrock checks each
// request's signature with: a client signs with these (for example through
// AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and AWS_REGION).
const (
	BedrockAccessKeyID     = "AKIDBUZZGATETEST0001"
	BedrockSecretAccessKey = "buzzgate-test-secret-access-key"
	BedrockRegion          = "us-east-1"
)

// BedrockStreamSuffix ends the path of InvokeModelWithResponseStream:
// POST /model/<model id>/invoke-with-response-stream.
const BedrockStreamSuffix = "/invoke-with-response-stream"

// ConverseStreamSuffix ends the path of ConverseStream: POST /model/<model
// id>/converse-stream.
const ConverseStreamSuffix = "/converse-stream"

// BedrockCredentials are the credentials NewBedrock checks signatures with.
var BedrockCredentials = aws.Credentials{AccessKeyID: BedrockAccessKeyID, SecretAccessKey: BedrockSecretAccessKey, Source: "providertest"}

// NewBedrock starts a fake AWS Bedrock Runtime: POST
// /model/<id>/invoke-with-response-stream (InvokeModelWithResponseStream)
// and /model/<id>/invoke (InvokeModel) for Claude, answered as NewAnthropic
// answers (the same Response readings; a 200 Body is an Anthropic event
// stream to send), each Anthropic event in a "chunk" event of the AWS
// event-stream encoding ({"bytes": <the event's JSON, base64>}); and POST
// /model/<id>/converse-stream (ConverseStream) for any model, answered with
// Converse's events (see streamConverse). URL is the endpoint,
// http://127.0.0.1:PORT, for the SDK's endpoint override.
//
// Every request must be signed with Signature Version 4 for service
// "bedrock", BedrockRegion and BedrockCredentials: the signature is
// computed again with the SDK's own signer, and a request whose signature
// differs, or that has none, gets a 403 InvalidSignatureException (and is
// not counted as a call). A non-200 Status gets Bedrock's error shape:
// {"message": ...} with the x-amzn-errortype of the status (429
// ThrottlingException, 400 ValidationException, 403
// AccessDeniedException, 404 ResourceNotFoundException, 503
// ServiceUnavailableException, 500 InternalServerException). CutError sends
// a modelStreamErrorException inside the stream.
func NewBedrock(tb testing.TB) *Server {
	tb.Helper()
	return start(tb, bedrockProtocol)
}

// serveBedrock checks a Bedrock call's path and signature, then answers it
// as the Anthropic server does.
func (s *Server) serveBedrock(w http.ResponseWriter, r *http.Request) {
	model, op, ok := bedrockPath(r.URL.Path)
	if !ok || r.Method != http.MethodPost {
		w.Header().Set("X-Amzn-Errortype", converse.ErrUnknownOperation)
		writeJSON(w, http.StatusNotFound, marshal(converse.Error{Message: fmt.Sprintf("no operation at %s %s", r.Method, r.URL.Path)}))
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	if err := verifySigV4(r, body, "bedrock"); err != nil {
		w.Header().Set("X-Amzn-Errortype", converse.ErrInvalidSignature)
		writeJSON(w, http.StatusForbidden, marshal(converse.Error{Message: err.Error()}))
		return
	}
	if op != "invoke" && op != strings.TrimPrefix(BedrockStreamSuffix, "/") && op != strings.TrimPrefix(ConverseStreamSuffix, "/") {
		w.Header().Set("X-Amzn-Errortype", converse.ErrUnknownOperation)
		writeJSON(w, http.StatusNotFound, marshal(converse.Error{Message: "unsupported operation " + op}))
		return
	}
	call, resp, handler, ok := s.arrive(r.Header, r.URL.Path, body)
	if !ok {
		w.Header().Set("X-Amzn-Errortype", converse.ErrServiceUnavailable)
		writeJSON(w, http.StatusServiceUnavailable, s.errorBody("server closing", http.StatusServiceUnavailable))
		return
	}
	defer s.handlers.Done()
	req := newRequest(r.Header, body)
	req.Path = r.URL.Path
	if req.JSON != nil {
		req.JSON["model"] = model // the answer names the model the path does
	}
	if handler != nil {
		resp = handler(call, req)
	}
	s.respond(r.Context(), w, call, req, resp)
}

// bedrockPath splits /model/<id>/<operation>.
func bedrockPath(p string) (model, op string, ok bool) {
	rest, ok := strings.CutPrefix(p, "/model/")
	if !ok {
		return "", "", false
	}
	i := strings.LastIndexByte(rest, '/')
	if i <= 0 {
		return "", "", false
	}
	return rest[:i], rest[i+1:], true
}

// bedrockErrorType is the error type Bedrock names for a status.
func bedrockErrorType(status int) string {
	if t, ok := bedrockErrorTypes[status]; ok {
		return t
	}
	return converse.ErrInternalServer
}

// bedrockErrorTypes are the statuses whose error type is not
// InternalServerException.
var bedrockErrorTypes = map[int]string{
	http.StatusTooManyRequests:    converse.ErrThrottling,
	http.StatusBadRequest:         converse.ErrValidation,
	http.StatusForbidden:          converse.ErrAccessDenied,
	http.StatusNotFound:           converse.ErrResourceNotFound,
	http.StatusServiceUnavailable: converse.ErrServiceUnavailable,
	http.StatusRequestTimeout:     converse.ErrModelTimeout,
}

// verifySigV4 computes r's Signature Version 4 for service again, with the
// SDK's signer, BedrockCredentials and BedrockRegion, the headers r says it
// signed and the time it says it was signed at, and compares it with r's.
func verifySigV4(r *http.Request, body []byte, service string) error {
	auth := r.Header.Get("Authorization")
	if auth == "" {
		return errors.New("missing authentication token")
	}
	fields := map[string]string{}
	rest, ok := strings.CutPrefix(auth, "AWS4-HMAC-SHA256 ")
	if !ok {
		return errors.New("not an AWS4-HMAC-SHA256 signature")
	}
	for f := range strings.SplitSeq(rest, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(f), "=")
		fields[k] = v
	}
	scope := strings.Split(fields["Credential"], "/")
	if len(scope) != 5 || scope[0] != BedrockAccessKeyID || scope[2] != BedrockRegion || scope[3] != service || scope[4] != "aws4_request" {
		return fmt.Errorf("credential scope %q is not %s/<date>/%s/%s/aws4_request", fields["Credential"], BedrockAccessKeyID, BedrockRegion, service)
	}
	at, err := time.Parse("20060102T150405Z", r.Header.Get("X-Amz-Date"))
	if err != nil {
		return fmt.Errorf("x-amz-date: %v", err)
	}
	u := *r.URL
	u.Scheme, u.Host = "http", r.Host
	again := &http.Request{Method: r.Method, URL: &u, Host: r.Host, Header: http.Header{}, ContentLength: r.ContentLength}
	for h := range strings.SplitSeq(fields["SignedHeaders"], ";") {
		switch h {
		case "host", "content-length":
		default:
			if v, ok := r.Header[http.CanonicalHeaderKey(h)]; ok {
				again.Header[http.CanonicalHeaderKey(h)] = v
			}
		}
	}
	sum := sha256.Sum256(body)
	if err := v4.NewSigner().SignHTTP(context.Background(), BedrockCredentials, again, hex.EncodeToString(sum[:]), service, BedrockRegion, at); err != nil {
		return err
	}
	if got := again.Header.Get("Authorization"); got != auth {
		return errors.New("the request signature we calculated does not match the signature you provided")
	}
	return nil
}

// bedrockEvents sends a scripted 200 Body, an Anthropic event stream, as
// Bedrock does: each event's data in a chunk event.
func (s *Server) bedrockEvents(w http.ResponseWriter, resp Response) {
	send, _ := startBedrockStream(w, resp)
	r := ssestream.NewReader(strings.NewReader(resp.Body), 1<<20)
	for {
		ev, err := r.Next()
		if err != nil || !send(ev.Event, ev.Data) {
			return
		}
	}
}

// eventStreamHeader is the head of an answer in the AWS event-stream
// encoding.
var eventStreamHeader = map[string]string{
	"Content-Type":                "application/vnd.amazon.eventstream",
	"X-Amzn-Bedrock-Content-Type": "application/json",
}

// startEventStream sends the head of an answer in the AWS event-stream
// encoding (200, its content type, resp's headers); event writes one event
// of type typ with payload, or, when typ is "", a
// modelStreamErrorException, and flushes it.
func startEventStream(w http.ResponseWriter, resp Response) (event func(typ string, payload []byte) bool, rc *http.ResponseController) {
	rc = writeStreamHead(w, eventStreamHeader, resp)
	enc := eventstream.NewEncoder()
	return func(typ string, payload []byte) bool {
		msg := eventstream.Message{Headers: eventstream.Headers{
			{Name: ":content-type", Value: eventstream.StringValue("application/json")},
		}, Payload: payload}
		if typ == "" {
			msg.Headers = append(msg.Headers,
				eventstream.Header{Name: ":message-type", Value: eventstream.StringValue("exception")},
				eventstream.Header{Name: ":exception-type", Value: eventstream.StringValue(converse.ExceptionModelStreamError)})
			msg.Payload = marshal(converse.Error{Message: "scripted mid-stream error"})
		} else {
			msg.Headers = append(msg.Headers,
				eventstream.Header{Name: ":message-type", Value: eventstream.StringValue("event")},
				eventstream.Header{Name: ":event-type", Value: eventstream.StringValue(typ)})
		}
		if err := enc.Encode(w, msg); err != nil {
			return false
		}
		return rc.Flush() == nil
	}, rc
}

// startBedrockStream sends an InvokeModelWithResponseStream answer's head;
// send writes one Anthropic event as a chunk event, or, for an "error"
// event, a modelStreamErrorException.
func startBedrockStream(w http.ResponseWriter, resp Response) (send func(name string, data []byte) bool, rc *http.ResponseController) {
	event, rc := startEventStream(w, resp)
	return func(name string, data []byte) bool {
		if name == messages.EventError {
			return event("", nil)
		}
		return event(converse.EventChunk, marshal(converse.PayloadPart{Bytes: data}))
	}, rc
}

// streamConverse sends a ConverseStream answer: messageStart, the text
// deltas (or a tool call's start and its input in two halves), the
// block's stop, messageStop with the stop reason (Messages' names, which
// Converse shares), and metadata with the usage (unless NoUsage); CutError
// sends a modelStreamErrorException.
func (s *Server) streamConverse(ctx context.Context, w http.ResponseWriter, a anthropicAnswer, resp Response) {
	event, _ := startEventStream(w, resp)
	if !event(converse.EventMessageStart, marshal(converse.MessageStart{Role: messages.RoleAssistant})) {
		return
	}
	var deltas []converse.BlockDelta
	for i := range a.pieces {
		d := converse.BlockDelta{Text: &a.pieces[i]}
		if a.toolCall != nil {
			d = converse.BlockDelta{ToolUse: &converse.ToolUseDelta{Input: a.pieces[i]}}
		}
		deltas = append(deltas, d)
	}
	if !s.pace(ctx, w, resp, len(deltas), func(i int) bool {
		if i == 0 && a.toolCall != nil && !event(converse.EventContentBlockStart, marshal(converse.ContentBlockStart{
			Start: converse.BlockStart{ToolUse: &converse.ToolUseStart{ToolUseID: a.toolID, Name: a.toolCall.Name}}})) {
			return false
		}
		return event(converse.EventContentBlockDelta, marshal(converse.ContentBlockDelta{Delta: deltas[i]}))
	}, func() { event("", nil) }) {
		return
	}
	if !event(converse.EventContentBlockStop, marshal(converse.ContentBlockStop{})) ||
		!event(converse.EventMessageStop, marshal(converse.MessageStop{StopReason: a.stopReason})) {
		return
	}
	if !resp.NoUsage {
		p, c := a.usage.PromptTokens, a.usage.CompletionTokens
		event(converse.EventMetadata, marshal(converse.Metadata{
			Usage:   converse.Usage{InputTokens: p, OutputTokens: c, TotalTokens: p + c},
			Metrics: converse.Metrics{LatencyMs: 1}}))
	}
}
