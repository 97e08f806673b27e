package bedrock

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/smithy-go"

	"github.com/buzzgate/buzzgate/pkg/llm"
	"github.com/buzzgate/buzzgate/pkg/provider/anthropic"
	"github.com/buzzgate/buzzgate/pkg/providertest"
)

// TestFailureClassOfExceptions: a Bedrock failure is classified by its
// exception, on a Claude model (InvokeModel, through the anthropic
// adapter, which sees only the status and Anthropic envelope that stand
// for it) as on any other (ConverseStream): only an exception that says
// the operator's setup is wrong (the model id, access to the model, the
// credentials) is FailConfig, which takes the route out; a validation
// error about the request is the client's (FailRejected, Bedrock's message
// alone). The errors are Bedrock's own: the x-amzn-errortype header and a
// {"message": ...} body, as the SDK reads them.
func TestFailureClassOfExceptions(t *testing.T) {
	tests := []struct {
		status  int
		errType string
		message string
		class   llm.FailureClass
		want    string
	}{
		{400, "ValidationException", "The provided model identifier is invalid.", llm.FailConfig,
			"ValidationException: The provided model identifier is invalid."},
		{400, "ValidationException", "Invocation of model ID anthropic.claude-sonnet-4-20250514-v1:0 with on-demand throughput isn\u2019t supported. Retry your request with the ID or ARN of an inference profile that contains this model.", llm.FailConfig,
			"ValidationException: Invocation of model ID anthropic.claude-sonnet-4-20250514-v1:0 with on-demand throughput isn\u2019t supported. Retry your request with the ID or ARN of an inference profile that contains this model."},
		{400, "ValidationException", "Malformed input request: #: extraneous key [file_id] is not permitted, please reformat your input and try again.", llm.FailRejected,
			"Malformed input request: #: extraneous key [file_id] is not permitted, please reformat your input and try again."},
		{400, "ValidationException", "A conversation must start with a user message. Try again with a conversation that starts with a user message.", llm.FailRejected,
			"A conversation must start with a user message. Try again with a conversation that starts with a user message."},
		{403, "AccessDeniedException", "You don't have access to the model with the specified model ID.", llm.FailConfig,
			"AccessDeniedException: You don't have access to the model with the specified model ID."},
		{404, "ResourceNotFoundException", "Model use case details have not been submitted for this account. Fill out the Anthropic use case details form before using the model.", llm.FailConfig,
			"ResourceNotFoundException: Model use case details have not been submitted for this account. Fill out the Anthropic use case details form before using the model."},
		{404, "ResourceNotFoundException", "This model version has reached the end of its life. Please refer to the AWS documentation for more details.", llm.FailConfig,
			"ResourceNotFoundException: This model version has reached the end of its life. Please refer to the AWS documentation for more details."},
		{403, "UnrecognizedClientException", "The security token included in the request is invalid.", llm.FailConfig,
			"UnrecognizedClientException: The security token included in the request is invalid."},
		{429, "ThrottlingException", "Too many requests, please wait before trying again.", llm.FailThrottled,
			"ThrottlingException: Too many requests, please wait before trying again."},
		{503, "ServiceUnavailableException", "Bedrock is unable to process your request.", llm.FailTransient,
			"ServiceUnavailableException: Bedrock is unable to process your request."},
	}
	up := providertest.NewBedrock(t)
	cfg, err := config.LoadDefaultConfig(context.Background(), config.WithCredentialsProvider(
		credentials.NewStaticCredentialsProvider(providertest.BedrockAccessKeyID, providertest.BedrockSecretAccessKey, "")))
	if err != nil {
		t.Fatal(err)
	}
	rt := NewRuntime(cfg, providertest.BedrockRegion, up.URL(), nil)
	c := New("aws", rt, anthropic.NewOver("aws", ClaudeTransport{Runtime: rt}))
	for _, model := range []string{claudeModel, "amazon.nova-pro-v1:0"} {
		for _, tt := range tests {
			up.SetDefault(providertest.Response{Status: tt.status, Body: `{"message":"` + tt.message + `"}`,
				Header: map[string]string{"X-Amzn-Errortype": tt.errType + ":http://internal.amazon.com/coral/com.amazon.bedrock/"}})
			s, err := c.ChatStream(t.Context(), &llm.UpstreamRequest{Model: model, Proto: llm.ProtoChat,
				Body: []byte(`{"model":"m","messages":[{"role":"user","content":"Hi"}],"stream":true}`)})
			if s != nil {
				s.Close()
				t.Fatalf("%s, %s: a stream", model, tt.errType)
			}
			var pe *llm.ProviderError
			if !errors.As(err, &pe) {
				t.Fatalf("%s, %s: %v, want a *llm.ProviderError", model, tt.errType, err)
			}
			if pe.Class != tt.class || pe.Status != tt.status || pe.Message != tt.want {
				t.Errorf("%s, %s %q: class %v, status %d, message %q; want %v, %d, %q", model, tt.errType, tt.message, pe.Class, pe.Status, pe.Message, tt.class, tt.status, tt.want)
			}
		}
	}
}

// TestFailureClassOfStreamExceptions: an exception inside a Converse
// stream (a member named in lower camel case) gets the same class.
func TestFailureClassOfStreamExceptions(t *testing.T) {
	for code, want := range map[string]llm.FailureClass{
		"validationException":           llm.FailRejected,
		"throttlingException":           llm.FailThrottled,
		"modelStreamErrorException":     llm.FailTransient,
		"internalServerException":       llm.FailTransient,
		"serviceUnavailableException":   llm.FailTransient,
		"accessDeniedException":         llm.FailConfig,
		"resourceNotFoundException":     llm.FailConfig,
		"someExceptionAddedLater":       llm.FailTransient,
		"ServiceQuotaExceededException": llm.FailThrottled,
	} {
		if pe := exceptionFailure(code, "m"); pe.Class != want {
			t.Errorf("%s: %v, want %v", code, pe.Class, want)
		}
	}
	if pe := exceptionFailure("validationException", "The provided model identifier is invalid."); pe.Class != llm.FailConfig {
		t.Errorf("a model id refused in the stream: %v, want config", pe.Class)
	}
	var pe *llm.ProviderError
	if err := classify(context.Background(), &smithy.GenericAPIError{Code: "ValidationException", Message: "The provided model identifier is invalid."}); !errors.As(err, &pe) || pe.Class != llm.FailConfig || pe.Status != 400 {
		t.Errorf("classify: %v", err)
	}
}

// TestStatus: each Bedrock error the issue names gets the status (and so
// the fallback class) it stands for; a failure without an answer none.
func TestStatus(t *testing.T) {
	for code, want := range map[string]int{
		"ThrottlingException":           429,
		"ServiceQuotaExceededException": 429,
		"ValidationException":           400,
		"AccessDeniedException":         403,
		"UnrecognizedClientException":   403,
		"ExpiredTokenException":         403,
		"InvalidSignatureException":     403,
		"ResourceNotFoundException":     404,
		"ModelNotReadyException":        503,
		"ServiceUnavailableException":   503,
		"ModelTimeoutException":         504,
		"InternalServerException":       500,
		"ModelErrorException":           500,
	} {
		got, msg := Status(&smithy.GenericAPIError{Code: code, Message: "m"})
		if got != want || !strings.Contains(msg, "m") {
			t.Errorf("%s: %d %q, want %d", code, got, msg, want)
		}
	}
	if got, _ := Status(errors.New("dial tcp: connection refused")); got != 0 {
		t.Errorf("a connection failure: %d, want 0", got)
	}
	// The class a Converse call's failure gets from that status.
	for code, want := range map[string]llm.FailureClass{
		"ThrottlingException": llm.FailThrottled, "ValidationException": llm.FailRejected,
		"AccessDeniedException": llm.FailConfig, "ResourceNotFoundException": llm.FailConfig,
		"ModelNotReadyException": llm.FailTransient, "InternalServerException": llm.FailTransient,
	} {
		var pe *llm.ProviderError
		if err := classify(context.Background(), &smithy.GenericAPIError{Code: code}); !errors.As(err, &pe) || pe.Class != want {
			t.Errorf("%s: %v, want class %v", code, err, want)
		}
	}
}
