//go:build integration

package codexcli_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/buzzgate/buzzgate/internal/codexcli"
)

const (
	testKey   = "sk-codex-test-key-0123456789"
	testModel = "codex-model"
	encrypted = "gAAAAB-scripted-encrypted-content-7f3a"
)

// binary finds codex, failing the test (never skipping it) when it is not
// installed.
func binary(t *testing.T) string {
	t.Helper()
	bin, err := codexcli.Binary()
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// execCommand is a function call to codex's shell tool, exec_command, with
// the arguments codex's own model sends.
func execCommand(cmd string, extra ...any) codexcli.Item {
	args := map[string]any{"cmd": cmd}
	for i := 0; i+1 < len(extra); i += 2 {
		args[extra[i].(string)] = extra[i+1]
	}
	b, _ := json.Marshal(args)
	return codexcli.FunctionCall("fc_scripted1", "call_scripted1", "exec_command", string(b))
}

// run runs codex once against f in a fresh directory.
func run(t *testing.T, ctx context.Context, f *codexcli.Fake, prompt string) (codexcli.Result, string, error) {
	t.Helper()
	dir := t.TempDir()
	res, err := codexcli.Run(ctx, codexcli.Options{
		Binary: binary(t), BaseURL: f.URL(), APIKey: testKey, Model: testModel,
		Prompt: prompt, Dir: dir, Timeout: 2 * time.Minute,
	})
	t.Logf("codex exec: exit %d in %s, %d upstream calls", res.ExitCode, res.Duration.Round(time.Millisecond), f.Calls())
	return res, dir, err
}

// items is a request's input items.
func items(t *testing.T, req codexcli.Request) []map[string]any {
	t.Helper()
	raw, ok := req.JSON["input"].([]any)
	if !ok {
		t.Fatalf("request has no input array: %.300s", req.Body)
	}
	out := make([]map[string]any, 0, len(raw))
	for _, it := range raw {
		m, ok := it.(map[string]any)
		if !ok {
			t.Fatalf("input item %v is not an object", it)
		}
		out = append(out, m)
	}
	return out
}

// indexOf is the index of the first item of type typ, -1 if none.
func indexOf(its []map[string]any, typ string) int {
	return slices.IndexFunc(its, func(m map[string]any) bool { return m["type"] == typ })
}

// checkCalls fails unless the fake received exactly n requests, every one a
// POST /v1/responses authenticated with the test key.
func checkCalls(t *testing.T, f *codexcli.Fake, n int) []codexcli.Request {
	t.Helper()
	reqs := f.Requests()
	for i, r := range reqs {
		if r.Method != http.MethodPost || r.Path != codexcli.ResponsesPath {
			t.Errorf("request %d: %s %s, want POST %s", i+1, r.Method, r.Path, codexcli.ResponsesPath)
		}
		if got := r.Header.Get("Authorization"); got != "Bearer "+testKey {
			t.Errorf("request %d: Authorization is not the test key's bearer token", i+1)
		}
	}
	if len(reqs) != n {
		t.Fatalf("the fake received %d requests, want %d", len(reqs), n)
	}
	return reqs
}

// TestExecShellRoundTrip drives one codex turn with a shell round trip:
// the fake answers turn 1 with a reasoning item (encrypted_content) and an
// exec_command call, codex runs the command and sends its output back with
// the reasoning item, and the fake's closing text is codex's final message.
func TestExecShellRoundTrip(t *testing.T) {
	f := codexcli.NewFake(t)
	final := `The command printed "buzzgate-codex-ok".`
	f.Script(
		codexcli.Response{ID: "resp_turn1", Items: []codexcli.Item{
			codexcli.Reasoning("rs_scripted1", encrypted, "Running the command."),
			execCommand("echo buzzgate-codex-ok"),
		}, Usage: codexcli.Usage{InputTokens: 9000, OutputTokens: 40, ReasoningTokens: 16}},
		codexcli.Response{ID: "resp_turn2", Items: []codexcli.Item{
			codexcli.Message("msg_scripted1", final),
		}, Usage: codexcli.Usage{InputTokens: 9100, CachedTokens: 9000, OutputTokens: 12}},
	)
	prompt := "Run `echo buzzgate-codex-ok` and tell me what it printed."
	res, _, err := run(t, context.Background(), f, prompt)
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("codex exec: exit %d, %v\nstderr:\n%s", res.ExitCode, err, res.Stderr)
	}
	if !strings.Contains(res.LastMessage, final) || !strings.Contains(res.Stdout, final) {
		t.Errorf("final message %q, stdout %q: want both to hold %q", res.LastMessage, res.Stdout, final)
	}

	reqs := checkCalls(t, f, 2)
	turn1, turn2 := reqs[0], reqs[1]
	for i, r := range reqs {
		if r.JSON["model"] != testModel || r.JSON["stream"] != true || r.JSON["store"] != false {
			t.Errorf("request %d: model %v, stream %v, store %v; want %q, true, false",
				i+1, r.JSON["model"], r.JSON["stream"], r.JSON["store"], testModel)
		}
		if inc, _ := r.JSON["include"].([]any); !slices.Contains(inc, any("reasoning.encrypted_content")) {
			t.Errorf("request %d: include %v lacks reasoning.encrypted_content", i+1, r.JSON["include"])
		}
	}
	tools, _ := turn1.JSON["tools"].([]any)
	if !slices.ContainsFunc(tools, func(x any) bool {
		m, _ := x.(map[string]any)
		return m["type"] == "function" && m["name"] == "exec_command"
	}) {
		t.Errorf("turn 1 does not declare the exec_command function: %.500s", turn1.Body)
	}
	in1 := items(t, turn1)
	last := in1[len(in1)-1]
	if last["role"] != "user" || !strings.Contains(fmt.Sprint(last["content"]), prompt) {
		t.Errorf("turn 1's last input item %v is not the prompt", last)
	}

	in2 := items(t, turn2)
	rs, fc, out := indexOf(in2, "reasoning"), indexOf(in2, "function_call"), indexOf(in2, "function_call_output")
	if rs < 0 || fc < 0 || out < 0 || !(rs < fc && fc < out) {
		t.Fatalf("turn 2's input holds reasoning at %d, function_call at %d, function_call_output at %d; want them in that order", rs, fc, out)
	}
	if in2[rs]["id"] != "rs_scripted1" || in2[rs]["encrypted_content"] != encrypted {
		t.Errorf("turn 2's reasoning item %v does not carry turn 1's id and encrypted_content", in2[rs])
	}
	if in2[fc]["call_id"] != "call_scripted1" || in2[fc]["name"] != "exec_command" {
		t.Errorf("turn 2's function_call %v is not turn 1's", in2[fc])
	}
	output, _ := in2[out]["output"].(string)
	if in2[out]["call_id"] != "call_scripted1" || !strings.Contains(output, "buzzgate-codex-ok") {
		t.Errorf("turn 2's function_call_output %v does not answer call_scripted1 with the command's output", in2[out])
	}
}

// TestExecKeepsKeyFromCommands checks that the API key, which codex reads
// from its environment, does not reach the environment of the commands the
// model runs, whose output goes back upstream.
func TestExecKeepsKeyFromCommands(t *testing.T) {
	f := codexcli.NewFake(t)
	f.Script(
		codexcli.Response{Items: []codexcli.Item{codexcli.Reasoning("rs_env", encrypted), execCommand("env")}},
		codexcli.Response{Items: []codexcli.Item{codexcli.Message("msg_env", "done")}},
	)
	res, _, err := run(t, context.Background(), f, "Print your environment.")
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("codex exec: exit %d, %v\nstderr:\n%s", res.ExitCode, err, res.Stderr)
	}
	in2 := items(t, checkCalls(t, f, 2)[1])
	out := indexOf(in2, "function_call_output")
	if out < 0 {
		t.Fatal("turn 2 has no function_call_output")
	}
	output, _ := in2[out]["output"].(string)
	if !strings.Contains(output, "CODEX_HOME=") {
		t.Fatalf("the command's output does not look like env's: %.200q", output)
	}
	for name, s := range map[string]string{"the command's output": output, "stdout": res.Stdout, "stderr": res.Stderr} {
		if strings.Contains(s, testKey) || strings.Contains(s, codexcli.EnvAPIKey) {
			t.Errorf("%s shows the API key or its variable", name)
		}
	}
}

// TestExecUpstreamError checks that an upstream error ends the run at once,
// non-zero, after one request (no retries).
func TestExecUpstreamError(t *testing.T) {
	f := codexcli.NewFake(t)
	f.Script(codexcli.Response{Status: http.StatusInternalServerError})
	res, _, err := run(t, context.Background(), f, "Say hello.")
	if err != nil {
		t.Fatalf("codex exec: %v\nstderr:\n%s", err, res.Stderr)
	}
	if res.ExitCode == 0 {
		t.Errorf("codex exec exited 0 on an upstream 500; stdout %q", res.Stdout)
	}
	checkCalls(t, f, 1)
}

// TestRunKillsEverythingItStarted ends a run while a command the model
// started is still running: Run returns, and that command is gone too.
// (When codex exits by itself, it ends its commands' process groups.)
func TestRunKillsEverythingItStarted(t *testing.T) {
	f := codexcli.NewFake(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	release := make(chan struct{})
	t.Cleanup(func() { close(release) }) // before the fake closes
	f.SetHandler(func(call int, req codexcli.Request) codexcli.Response {
		if call == 1 {
			// A command that outlives its turn (exec_command returns after
			// yield_time_ms with it still running) and would outlive codex:
			// codex runs it in a session of its own, outside codex's
			// process group, and its shell's death signal does not reach
			// the nohup'd job.
			return codexcli.Response{Items: []codexcli.Item{
				execCommand("nohup sleep 600 >/dev/null 2>&1 & echo $! > pid; wait", "yield_time_ms", 250),
			}}
		}
		cancel() // end the run while turn 2 waits for its answer
		<-release
		return codexcli.Response{Status: http.StatusServiceUnavailable}
	})
	res, dir, err := run(t, ctx, f, "Start a long command.")
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Run returned %v, want the context's cancellation\nstderr:\n%s", err, res.Stderr)
	}
	if res.ExitCode != -1 {
		t.Errorf("exit code %d, want -1 (killed)", res.ExitCode)
	}
	b, err := os.ReadFile(filepath.Join(dir, "pid"))
	if err != nil {
		t.Fatalf("the command did not run: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatalf("pid file holds %q", b)
	}
	// SIGKILL has been sent; the process is gone (or a zombie) once the
	// kernel has delivered it.
	deadline := time.Now().Add(10 * time.Second)
	for alive(pid) {
		if time.Now().After(deadline) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("the command (pid %d) outlived the run", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// alive tells whether pid is a process that has not ended.
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// pid (comm) state …: the state follows the last ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && i+2 < len(s) && s[i+2] != 'Z' && s[i+2] != 'X'
}
