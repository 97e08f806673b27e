package bedrock

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime/types"
	"github.com/aws/smithy-go"

	"github.com/buzzgate/buzzgate/pkg/llm"
	"github.com/buzzgate/buzzgate/pkg/wire/messages"
)

// AnthropicVersion is the anthropic_version a Messages body carries on
// Bedrock, in place of the anthropic-version header.
const AnthropicVersion = "bedrock-2023-05-31"

// ClaudeEndpoint is the URL an anthropic adapter over ClaudeTransport is
// given: the transport calls Bedrock, never this host.
const ClaudeEndpoint = "https://bedrock-runtime.invalid"

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

// ClaudeTransport is an http.RoundTripper that carries an anthropic
// adapter's Messages calls to Claude on Bedrock: it takes the POST
// /v1/messages request the adapter makes, calls
// InvokeModelWithResponseStream with its body (less "model" and "stream",
// plus anthropic_version, and the anthropic-beta header's values as
// anthropic_beta), and answers with the Anthropic events Bedrock sends,
// unwrapped from its event stream and sent on byte for byte as a
// text/event-stream. Bedrock's failures become the statuses the adapter
// classifies (see Status); an exception inside the stream becomes an
// Anthropic error event.
type ClaudeTransport struct {
	Runtime *bedrockruntime.Client
}

// RoundTrip implements http.RoundTripper.
func (t ClaudeTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	body, err := io.ReadAll(req.Body)
	req.Body.Close()
	if err != nil {
		return nil, err
	}
	if req.Method != http.MethodPost || req.URL.Path != "/v1/messages" {
		// Only generation goes to Bedrock this way: anything else (a
		// count_tokens call) must never become one.
		return status(req, http.StatusNotFound, "not_found_error", "not served on Bedrock: "+req.URL.Path), nil
	}
	var head struct {
		Model string `json:"model"`
	}
	if err := json.Unmarshal(body, &head); err != nil || head.Model == "" {
		return status(req, http.StatusBadRequest, "invalid_request_error", "the request has no model"), nil
	}
	set := map[string][]byte{"model": nil, "stream": nil, "anthropic_version": []byte(strconv.Quote(AnthropicVersion))}
	if betas := req.Header.Values(messages.HeaderBeta); len(betas) > 0 {
		var list []string
		for _, v := range betas {
			for b := range strings.SplitSeq(v, ",") {
				if b = strings.TrimSpace(b); b != "" {
					list = append(list, b)
				}
			}
		}
		if len(list) > 0 {
			set["anthropic_beta"], _ = json.Marshal(list)
		}
	}
	body, err = llm.SetTopLevel(body, set)
	if err != nil {
		return status(req, http.StatusBadRequest, "invalid_request_error", "the request body is not a JSON object"), nil
	}
	out, err := t.Runtime.InvokeModelWithResponseStream(req.Context(), &bedrockruntime.InvokeModelWithResponseStreamInput{
		ModelId:     aws.String(head.Model),
		Body:        body,
		ContentType: aws.String("application/json"),
		Accept:      aws.String("application/json"),
	})
	if err != nil {
		if req.Context().Err() != nil {
			return nil, req.Context().Err()
		}
		code, typ, msg := Status(err)
		if code == 0 {
			return nil, err // no answer: a connection failure
		}
		if slot, ok := req.Context().Value(failureKey{}).(*failure); ok {
			*slot = failureOf(err)
		}
		return status(req, code, typ, msg), nil
	}
	pr, pw := io.Pipe()
	es := out.GetStream()
	go pump(req.Context(), es, pw)
	return &http.Response{
		StatusCode: http.StatusOK, Status: "200 OK", Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header:  http.Header{"Content-Type": {"text/event-stream"}},
		Body:    &streamBody{pr: pr, es: es},
		Request: req, ContentLength: -1,
	}, nil
}

// failureKey is the context key of the *failure where ClaudeTransport
// puts the Bedrock failure it turned into a status, for Client to classify
// and describe the failure by Bedrock's exception, not by the status and
// Anthropic envelope that stand for it (the anthropic adapter keeps only
// the status of a 403, and reads a 404's not_found_error as Anthropic's).
type failureKey struct{}

// failure is a Bedrock exception as Client reports it.
type failure struct {
	set   bool
	class llm.FailureClass
	// msg is Bedrock's own words, "AccessDeniedException: ..." (for a
	// FailRejected, the message alone, as the client is shown it).
	msg string
}

// failureOf is err's class and message, err being an exception Bedrock
// answered with.
func failureOf(err error) failure {
	var apiErr smithy.APIError
	if !errors.As(err, &apiErr) {
		return failure{}
	}
	code, msg := apiErr.ErrorCode(), apiErr.ErrorMessage()
	f := failure{set: true, class: failureClass(code, msg), msg: code}
	switch {
	case f.class == llm.FailRejected && msg != "":
		f.msg = msg
	case msg != "":
		f.msg += ": " + msg
	}
	return f
}

// failureClass is the class of a Bedrock exception named code (as the API
// names it, "ValidationException", or as an event stream member does,
// "validationException"), with Bedrock's message msg:
//
//   - ThrottlingException, ServiceQuotaExceededException: FailThrottled;
//   - ValidationException: the request's (FailRejected), but for the
//     messages that say the route's model id is wrong ("The provided
//     model identifier is invalid.", "Invocation of model ID ... with
//     on-demand throughput isn't supported ..."): FailConfig;
//   - AccessDeniedException (no access to the model), ResourceNotFoundException
//     (an unknown model, or one past its end of life), and the
//     credentials' UnrecognizedClientException, InvalidSignatureException,
//     ExpiredTokenException: FailConfig, the operator's to fix. The
//     request names nothing Bedrock looks up (no S3 location, guardrail or
//     prompt is sent), so a missing resource is the route's model;
//   - anything else (ModelNotReadyException, ServiceUnavailableException,
//     ModelTimeoutException, InternalServerException,
//     ModelStreamErrorException, ...): FailTransient.
func failureClass(code, msg string) llm.FailureClass {
	switch strings.ToLower(code) {
	case "throttlingexception", "servicequotaexceededexception":
		return llm.FailThrottled
	case "validationexception":
		if modelIDRefused(msg) {
			return llm.FailConfig
		}
		return llm.FailRejected
	case "accessdeniedexception", "resourcenotfoundexception",
		"unrecognizedclientexception", "invalidsignatureexception", "expiredtokenexception":
		return llm.FailConfig
	}
	return llm.FailTransient
}

// modelIDRefused reports whether a ValidationException's message is about
// the model id the route names, in Bedrock's words (at the message's
// start, where nothing of the request is quoted).
func modelIDRefused(msg string) bool {
	msg = strings.ToLower(strings.TrimSpace(msg))
	return strings.HasPrefix(msg, "the provided model identifier is invalid") ||
		(strings.HasPrefix(msg, "invocation of model id ") && strings.Contains(msg, "on-demand throughput isn"))
}

// streamBody closes the event stream with the pipe it feeds.
type streamBody struct {
	pr *io.PipeReader
	es *bedrockruntime.InvokeModelWithResponseStreamEventStream
}

func (b *streamBody) Read(p []byte) (int, error) { return b.pr.Read(p) }

func (b *streamBody) Close() error {
	b.pr.Close()
	return b.es.Close()
}

// pump writes each chunk's Anthropic event to w as an SSE event named by
// its type, then the stream's end: EOF after a clean end, an error event
// for an exception, an early close for a broken stream.
func pump(ctx context.Context, es *bedrockruntime.InvokeModelWithResponseStreamEventStream, w *io.PipeWriter) {
	var buf bytes.Buffer
	for ev := range es.Events() {
		chunk, ok := ev.(*types.ResponseStreamMemberChunk)
		if !ok {
			continue // a member this code does not know: skipped, as SSE skips unknown fields
		}
		data := chunk.Value.Bytes
		var head struct {
			Type string `json:"type"`
		}
		_ = json.Unmarshal(data, &head)
		buf.Reset()
		if head.Type != "" && !strings.ContainsAny(head.Type, "\r\n") {
			buf.WriteString("event: ")
			buf.WriteString(head.Type)
			buf.WriteByte('\n')
		}
		// An event's JSON is one line; a line break in it would end the
		// SSE data field, so it is split into data lines, which join back.
		for line := range bytes.SplitSeq(data, []byte("\n")) {
			buf.WriteString("data: ")
			buf.Write(bytes.TrimSuffix(line, []byte("\r")))
			buf.WriteByte('\n')
		}
		buf.WriteByte('\n')
		if _, err := w.Write(buf.Bytes()); err != nil {
			return // the reader closed
		}
	}
	err := es.Err()
	switch {
	case err == nil:
		w.Close()
	case ctx.Err() != nil:
		w.CloseWithError(ctx.Err())
	default:
		var apiErr smithy.APIError
		if !errors.As(err, &apiErr) {
			w.CloseWithError(err) // the connection broke: a cut stream
			return
		}
		_, typ, msg := Status(err)
		ev, _ := json.Marshal(map[string]any{"type": "error", "error": map[string]string{"type": typ, "message": msg}})
		fmt.Fprintf(w, "event: error\ndata: %s\n\n", ev)
		w.Close()
	}
}

// Status is the HTTP status and Anthropic error type that stand for a
// Bedrock failure, with its message; 0 when err is no answer from Bedrock
// (a connection failure):
//
//   - ThrottlingException, ServiceQuotaExceededException: 429
//     (rate_limit_error);
//   - ValidationException: 400 (invalid_request_error), with Bedrock's
//     message;
//   - AccessDeniedException (the role may not call the model, or the
//     account has no access to it), UnrecognizedClientException,
//     InvalidSignatureException, ExpiredTokenException (the credentials):
//     403 (permission_error); ResourceNotFoundException (an unknown
//     model): 404 (not_found_error);
//   - ModelNotReadyException, ServiceUnavailableException: 503
//     (overloaded_error); ModelTimeoutException: 504 (api_error); anything
//     else Bedrock answered: 500 (api_error).
func Status(err error) (code int, errType, msg string) {
	var apiErr smithy.APIError
	if !errors.As(err, &apiErr) {
		return 0, "", ""
	}
	msg = apiErr.ErrorCode()
	if m := apiErr.ErrorMessage(); m != "" {
		msg += ": " + m
	}
	switch apiErr.ErrorCode() {
	case "ThrottlingException", "ServiceQuotaExceededException":
		return http.StatusTooManyRequests, "rate_limit_error", msg
	case "ValidationException":
		return http.StatusBadRequest, "invalid_request_error", apiErr.ErrorMessage()
	case "AccessDeniedException", "UnrecognizedClientException", "InvalidSignatureException", "ExpiredTokenException":
		return http.StatusForbidden, "permission_error", msg
	case "ResourceNotFoundException":
		return http.StatusNotFound, "not_found_error", msg
	case "ModelNotReadyException", "ServiceUnavailableException":
		return http.StatusServiceUnavailable, "overloaded_error", msg
	case "ModelTimeoutException":
		return http.StatusGatewayTimeout, "api_error", msg
	}
	return http.StatusInternalServerError, "api_error", msg
}

// status is an answer with code and Anthropic's error envelope.
func status(req *http.Request, code int, errType, msg string) *http.Response {
	b, _ := json.Marshal(map[string]any{"type": "error", "error": map[string]string{"type": errType, "message": msg}})
	return &http.Response{
		StatusCode: code, Status: strconv.Itoa(code) + " " + http.StatusText(code), Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: http.Header{"Content-Type": {"application/json"}}, Body: io.NopCloser(bytes.NewReader(b)),
		ContentLength: int64(len(b)), Request: req,
	}
}
