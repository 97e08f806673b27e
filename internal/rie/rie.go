// Package rie runs a Lambda function's bootstrap under the AWS Lambda
// Runtime Interface Emulator (aws-lambda-rie, installed by `make tools` into
// .tools/bin) and decodes the streamed HTTP integration responses it
// returns. The tests of functions/api and `make invoke` use it.
//
// What the emulator does, as measured with the version the Makefile pins:
//
//   - It is started as `aws-lambda-rie --runtime-interface-emulator-address
//     HOST:PORT --runtime-api-address HOST:PORT BOOTSTRAP`; both addresses are
//     needed to run two at once (the Runtime API defaults to 127.0.0.1:9001).
//     It starts the bootstrap at the first invocation, in a process group of
//     its own, with the emulator's own environment plus
//     AWS_LAMBDA_RUNTIME_API and AWS_LAMBDA_FUNCTION_NAME=test_function and
//     the like; AWS_LAMBDA_FUNCTION_TIMEOUT (seconds) bounds an invocation.
//   - It takes an event at POST /2015-03-31/functions/function/invocations
//     and answers 200 with what the function sent. Two invocations at once
//     crash it, so Emulator.Invoke sends one at a time.
//   - A streamed response comes back whole, once the function has finished
//     (it buffers), still in the wire format: the prelude JSON, eight NUL
//     bytes, the body. So under the emulator the format is checked, and real
//     incremental streaming is checked elsewhere (pkg/lambdaedge's tests
//     and the local server).
//   - On SIGTERM it kills the function and exits; Close sends SIGTERM, then
//     SIGKILL after a grace period. A bootstrap left behind exits by itself
//     when the Runtime API goes away.
package rie

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/buzzgate/buzzgate/internal/proc"
)

// EnvBinary names the environment variable that overrides where the
// emulator is (by default .tools/bin/aws-lambda-rie under the module root).
const EnvBinary = "BUZZGATE_RIE"

// NotInstalled is the message of the error returned when the emulator
// cannot be found.
const NotInstalled = "aws-lambda-rie is not installed: run `make tools` (make test installs it)"

// InvocationsPath is where the emulator takes events.
const InvocationsPath = "/2015-03-31/functions/function/invocations"

// Binary finds the emulator: $BUZZGATE_RIE, or .tools/bin/aws-lambda-rie in
// the directory holding go.mod (found by walking up from the working
// directory).
func Binary() (string, error) {
	return proc.Tool(EnvBinary, filepath.Join(".tools", "bin", "aws-lambda-rie"), NotInstalled)
}

// Build compiles the Lambda function in pkg (a package path or directory)
// into out for linux on this machine's architecture, with -tags
// lambda.norpc and the extra go build flags (a test passes -race when it
// runs with it, so that the build shares the test's build cache).
func Build(ctx context.Context, pkg, out string, flags ...string) error {
	args := append([]string{"build", "-tags", "lambda.norpc", "-o", out}, flags...)
	cmd := exec.CommandContext(ctx, "go", append(args, pkg)...)
	cmd.Env = append(os.Environ(), "GOOS=linux", "GOARCH="+runtime.GOARCH)
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go %s: %v\n%s", strings.Join(cmd.Args[1:], " "), err, b)
	}
	return nil
}

// Options configure an emulator.
type Options struct {
	// Bootstrap is the function's executable.
	Bootstrap string
	// Env is the function's environment beyond PATH (the emulator passes
	// its own environment on; nothing else of this process's is passed).
	Env []string
	// Log, when set, also gets the emulator's and the function's output.
	Log io.Writer
}

// Emulator is a running aws-lambda-rie with one function.
type Emulator struct {
	// URL is the emulator's base URL, http://127.0.0.1:PORT.
	URL string

	proc   *proc.Process
	out    *proc.SyncBuffer
	client *http.Client
	mu     sync.Mutex // one invocation at a time
}

// Start runs the emulator on free ports of 127.0.0.1 and waits until it
// accepts connections. The caller must Close it.
func Start(opts Options) (*Emulator, error) {
	bin, err := Binary()
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(opts.Bootstrap); err != nil {
		return nil, fmt.Errorf("bootstrap: %w", err)
	}
	return proc.Retry(3, func() (*Emulator, error) { return start(bin, opts) })
}

func start(bin string, opts Options) (*Emulator, error) {
	addr, err := proc.FreeAddr()
	if err != nil {
		return nil, err
	}
	apiAddr, err := proc.FreeAddr()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin,
		"--runtime-interface-emulator-address", addr,
		"--runtime-api-address", apiAddr,
		"--log-level", "warn",
		opts.Bootstrap)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH")}, opts.Env...)
	out := &proc.SyncBuffer{Limit: 256 << 10}
	var w io.Writer = out
	if opts.Log != nil {
		w = io.MultiWriter(out, opts.Log)
	}
	cmd.Stdout, cmd.Stderr = w, w
	p, err := proc.Start(cmd)
	if err != nil {
		return nil, fmt.Errorf("aws-lambda-rie: %w", err)
	}
	e := &Emulator{
		URL:    "http://" + addr,
		proc:   p,
		out:    out,
		client: &http.Client{Transport: &http.Transport{Proxy: nil}},
	}
	if err := p.WaitReady(10*time.Second, proc.Accepting(addr)); err != nil {
		e.Close()
		return nil, fmt.Errorf("aws-lambda-rie on %s: %w; output: %s", addr, err, out.String())
	}
	return e, nil
}

// Invoke sends one event and returns what the function answered, as the
// emulator passes it on. Invocations are sent one at a time.
func (e *Emulator) Invoke(ctx context.Context, event []byte) ([]byte, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.URL+InvocationsPath, bytes.NewReader(event))
	if err != nil {
		return nil, err
	}
	resp, err := e.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("invoke: %w", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("invoke: read the answer: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("invoke: the emulator answered %s: %q", resp.Status, b)
	}
	return b, nil
}

// Output is what the emulator and the function wrote so far (the first
// 256 KiB).
func (e *Emulator) Output() string { return e.out.String() }

// Close stops the emulator (SIGTERM, which also ends the function; SIGKILL
// after 5s) and waits for it to exit.
func (e *Emulator) Close() {
	e.proc.Stop(5 * time.Second)
	e.client.CloseIdleConnections()
}

// Response is a decoded streamed HTTP integration response (Decode), or a
// buffered API Gateway proxy response (DecodeBuffered).
type Response struct {
	StatusCode int
	// Header merges the prelude's headers and multiValueHeaders.
	Header http.Header
	Body   []byte
	// Prelude is the prelude's JSON as sent (the whole JSON answer when
	// buffered).
	Prelude json.RawMessage
}

// Decode splits a streamed HTTP integration response (the prelude JSON,
// eight NUL bytes, the body) and checks the prelude's shape.
func Decode(raw []byte) (*Response, error) {
	i := bytes.Index(raw, make([]byte, 8))
	if i < 0 {
		return nil, fmt.Errorf("not a streamed HTTP integration response (no eight-NUL delimiter): %.200q", raw)
	}
	var p struct {
		StatusCode        *int                `json:"statusCode"`
		Headers           map[string]string   `json:"headers"`
		MultiValueHeaders map[string][]string `json:"multiValueHeaders"`
	}
	dec := json.NewDecoder(bytes.NewReader(raw[:i]))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return nil, fmt.Errorf("prelude %.200q: %w", raw[:i], err)
	}
	if p.StatusCode == nil {
		return nil, fmt.Errorf("prelude %.200q has no statusCode", raw[:i])
	}
	r := &Response{StatusCode: *p.StatusCode, Header: http.Header{}, Body: raw[i+8:], Prelude: raw[:i]}
	for k, v := range p.Headers {
		r.Header.Add(k, v)
	}
	for k, vs := range p.MultiValueHeaders {
		for _, v := range vs {
			r.Header.Add(k, v)
		}
	}
	return r, nil
}

// DecodeBuffered reads a buffered API Gateway proxy response (the function's
// answer under SAM CLI, AWS_SAM_LOCAL=true) as `sam local start-api` does
// for a REST API (samcli/local/apigw/local_apigw_service.py,
// _parse_v1_payload_format_lambda_output): a JSON object with only the
// keys statusCode, headers, multiValueHeaders, body, isBase64Encoded (and
// base64Encoded, cookies); a positive statusCode (200 when missing or 0); headers and
// multiValueHeaders merged; the body a string. A base64 body is decoded
// (SAM CLI decodes it only when the API lists a binary media type the
// client accepts; this API lists none, so the function sends text).
func DecodeBuffered(raw []byte) (*Response, error) {
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(raw, &keys); err != nil {
		return nil, fmt.Errorf("the Lambda response must be a JSON object (SAM CLI answers 502): %.200q: %w", raw, err)
	}
	for k := range keys {
		switch k {
		case "statusCode", "headers", "multiValueHeaders", "body", "isBase64Encoded", "base64Encoded", "cookies":
		default:
			return nil, fmt.Errorf("invalid API Gateway response key %q (SAM CLI answers 502)", k)
		}
	}
	var p struct {
		StatusCode        *int                `json:"statusCode"`
		Headers           map[string]string   `json:"headers"`
		MultiValueHeaders map[string][]string `json:"multiValueHeaders"`
		Body              *string             `json:"body"`
		IsBase64Encoded   bool                `json:"isBase64Encoded"`
	}
	if err := json.Unmarshal(raw, &p); err != nil {
		return nil, fmt.Errorf("API Gateway response %.200q: %w", raw, err)
	}
	status := http.StatusOK // SAM CLI's `statusCode or 200` for a REST API
	if p.StatusCode != nil && *p.StatusCode != 0 {
		status = *p.StatusCode
	}
	if status <= 0 {
		return nil, fmt.Errorf("statusCode must be a positive int: %.200q", raw)
	}
	r := &Response{StatusCode: status, Header: http.Header{}, Prelude: raw}
	for k, vs := range p.MultiValueHeaders {
		for _, v := range vs {
			r.Header.Add(k, v)
		}
	}
	for k, v := range p.Headers {
		if !slices.Contains(p.MultiValueHeaders[k], v) {
			r.Header.Add(k, v)
		}
	}
	if p.Body != nil {
		r.Body = []byte(*p.Body)
		if p.IsBase64Encoded {
			b, err := base64.StdEncoding.DecodeString(*p.Body)
			if err != nil {
				return nil, fmt.Errorf("isBase64Encoded body: %w", err)
			}
			r.Body = b
		}
	}
	return r, nil
}
