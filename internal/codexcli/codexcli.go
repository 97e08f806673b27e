// Package codexcli runs the Codex CLI (`codex exec`, installed by `make
// tools`) once, non-interactively, against a Responses API base URL, and
// scripts a fake Responses API upstream (Fake, Events, Stream) for it and for
// the gateway's tests.
//
// Each run gets a fresh CODEX_HOME whose config.toml names one model
// provider at the base URL and turns off what would reach another host (see
// Config); traced with strace, a run of codex 0.169.0 connects to the base
// URL's host and port only. The API key travels in an environment variable
// only, which the agent's commands do not inherit.
package codexcli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/buzzgate/buzzgate/internal/proc"
)

// EnvBinary names the environment variable holding the path of the codex
// executable; by default it is .tools/codex/bin/codex under the module root.
const EnvBinary = "BUZZGATE_CODEX"

// NotInstalled starts the error returned when codex cannot be found.
const NotInstalled = "the Codex CLI is not installed: run `make tools` (make test installs it)"

// EnvAPIKey is the environment variable the run's model provider reads its
// API key from (its env_key).
const EnvAPIKey = "BUZZGATE_CODEX_API_KEY"

// ProviderID is the model provider's id in the generated config.toml.
const ProviderID = "buzzgate"

// DefaultTimeout bounds a run whose Options.Timeout is 0.
const DefaultTimeout = 2 * time.Minute

// Binary finds the codex executable: $BUZZGATE_CODEX, or
// .tools/codex/bin/codex under the module root.
func Binary() (string, error) {
	return proc.Tool(EnvBinary, filepath.Join(".tools", "codex", "bin", "codex"), NotInstalled)
}

// Options describe one run.
type Options struct {
	// Binary is the codex executable (see Binary).
	Binary string
	// BaseURL is the provider's base URL, such as http://127.0.0.1:PORT/v1;
	// codex posts to BaseURL + "/responses".
	BaseURL string
	// APIKey is sent as "Authorization: Bearer APIKEY". It reaches codex
	// through EnvAPIKey only, never its arguments or files.
	APIKey string
	// Model is the model name codex sends.
	Model string
	// Prompt is the one user message.
	Prompt string
	// Dir is the agent's working directory, where its commands run; it need
	// not be a git repository.
	Dir string
	// Timeout bounds the run; 0 means DefaultTimeout.
	Timeout time.Duration
}

// Result is how a run ended.
type Result struct {
	// Stdout and Stderr are what codex printed.
	Stdout, Stderr string
	// ExitCode is codex's exit status, -1 when it was killed.
	ExitCode int
	// LastMessage is the agent's final message (--output-last-message).
	LastMessage string
	// Duration is how long codex ran.
	Duration time.Duration
}

// Args are the arguments of `codex exec` for a run in dir that writes its
// final message to lastMessage, the prompt last.
//
// Commands run without sandbox and without approval
// (--dangerously-bypass-approvals-and-sandbox): exec mode cannot ask for an
// approval, and codex's Linux sandbox runs each command under bubblewrap in
// new user namespaces, which containers and distributions that restrict
// them refuse. The commands are the ones the test's fake upstream scripts.
// --ephemeral writes no session files; --skip-git-repo-check lets dir be
// any directory.
func Args(dir, lastMessage, prompt string) []string {
	return []string{
		"exec",
		"--skip-git-repo-check",
		"--ephemeral",
		"--dangerously-bypass-approvals-and-sandbox",
		"--strict-config",
		"--color", "never",
		"-C", dir,
		"--output-last-message", lastMessage,
		"--", prompt,
	}
}

// Config is the config.toml of a run: one provider at baseURL on the
// Responses API whose key is in EnvAPIKey, model, no retries (each request
// the upstream sees is one the agent meant, and a failing upstream ends the
// run at once), and nothing that talks to any other host. Each key is one
// codex 0.169.0 knows (Args passes --strict-config):
//
//   - features.plugins = false: otherwise codex syncs its curated plugin
//     list with `git ls-remote` against GitHub at startup;
//   - features.unbounded_connection_retries = false: otherwise a refused
//     connection makes codex retry forever ("Reconnecting... waiting for
//     network");
//   - check_for_update_on_startup, analytics, feedback and otel off, and
//     history not persisted;
//   - shell_environment_policy.exclude keeps EnvAPIKey out of the agent's
//     commands, whose output goes back to the upstream.
//
// web_search is left at its default: codex then declares the hosted
// web_search tool (external_web_access false), which the upstream, not
// codex, would run, as it does for every user who keeps the default.
func Config(baseURL, model string) string {
	q := func(s string) string { b, _ := json.Marshal(s); return string(b) } // a JSON string is a TOML basic string
	return strings.Join([]string{
		"model = " + q(model),
		"model_provider = " + q(ProviderID),
		`approval_policy = "never"`,
		`sandbox_mode = "danger-full-access"`,
		"check_for_update_on_startup = false",
		"",
		"[features]",
		"plugins = false",
		"unbounded_connection_retries = false",
		"",
		"[analytics]",
		"enabled = false",
		"",
		"[feedback]",
		"enabled = false",
		"",
		"[history]",
		`persistence = "none"`,
		"",
		"[otel]",
		`exporter = "none"`,
		`trace_exporter = "none"`,
		`metrics_exporter = "none"`,
		"log_user_prompt = false",
		"",
		"[shell_environment_policy]",
		"exclude = [" + q(EnvAPIKey) + "]",
		"",
		"[model_providers." + ProviderID + "]",
		"name = " + q(ProviderID),
		"base_url = " + q(baseURL),
		"env_key = " + q(EnvAPIKey),
		`wire_api = "responses"`,
		"request_max_retries = 0",
		"stream_max_retries = 0",
		"supports_websockets = false",
		"",
	}, "\n")
}

// Run runs `codex exec` once with o and returns how it ended. A non-zero
// exit is reported in Result.ExitCode, not as an error; the error is for a
// run that could not start or was killed at its timeout (ctx's end or
// o.Timeout). codex runs in a process group of its own, killed when the
// run ends; a run cut short also kills every process still below codex
// (killTree). codex itself ends the commands it started when it exits.
func Run(ctx context.Context, o Options) (Result, error) {
	if o.Binary == "" || o.BaseURL == "" || o.Model == "" || o.Dir == "" {
		return Result{ExitCode: -1}, errors.New("codexcli: Binary, BaseURL, Model and Dir are required")
	}
	dir, err := filepath.Abs(o.Dir)
	if err != nil {
		return Result{ExitCode: -1}, err
	}
	timeout := o.Timeout
	if timeout == 0 {
		timeout = DefaultTimeout
	}
	home, err := os.MkdirTemp("", "buzzgate-codex-")
	if err != nil {
		return Result{ExitCode: -1}, err
	}
	defer os.RemoveAll(home)
	codexHome := filepath.Join(home, "codex-home")
	if err := os.Mkdir(codexHome, 0o700); err != nil {
		return Result{ExitCode: -1}, err
	}
	if err := os.WriteFile(filepath.Join(codexHome, "config.toml"), []byte(Config(o.BaseURL, o.Model)), 0o600); err != nil {
		return Result{ExitCode: -1}, err
	}
	stdout, err := os.Create(filepath.Join(home, "stdout"))
	if err != nil {
		return Result{ExitCode: -1}, err
	}
	defer stdout.Close()
	stderr, err := os.Create(filepath.Join(home, "stderr"))
	if err != nil {
		return Result{ExitCode: -1}, err
	}
	defer stderr.Close()
	lastMessage := filepath.Join(home, "last-message")

	cmd := exec.Command(o.Binary, Args(dir, lastMessage, o.Prompt)...)
	cmd.Dir = dir
	cmd.Env = environ(home, codexHome, o.APIKey)
	// Files, not pipes: Wait returns when codex does, even if a command
	// it left behind still holds them open.
	cmd.Stdout, cmd.Stderr = stdout, stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	start := time.Now()
	p, err := proc.Start(cmd)
	if err != nil {
		return Result{ExitCode: -1}, err
	}
	pgid := p.PID()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	var runErr error
	select {
	case <-p.Exited():
	case <-timer.C:
		runErr = fmt.Errorf("codex exec did not finish within %s", timeout)
	case <-ctx.Done():
		runErr = fmt.Errorf("codex exec: %w", ctx.Err())
	}
	if runErr != nil {
		killTree(pgid)
	} else {
		// codex has ended (and been reaped): only its group's id is still
		// safe to signal, and whatever is left in it goes.
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
	}
	<-p.Exited()
	res := Result{ExitCode: -1, Duration: time.Since(start)}
	if st := cmd.ProcessState; st != nil && st.Exited() {
		res.ExitCode = st.ExitCode()
	}
	res.Stdout, res.Stderr = readFile(stdout.Name()), readFile(stderr.Name())
	res.LastMessage = readFile(lastMessage)
	if runErr == nil && res.ExitCode == -1 {
		runErr = errors.New("codex exec was killed: " + cmd.ProcessState.String())
	}
	return res, runErr
}

// environ is codex's whole environment: nothing inherited but PATH, so that
// no key or setting of the caller's (OPENAI_API_KEY, CODEX_HOME, proxies)
// leaks into the run.
func environ(home, codexHome, apiKey string) []string {
	return []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + home,
		"CODEX_HOME=" + codexHome,
		"TMPDIR=" + os.TempDir(),
		"LANG=C.UTF-8",
		"TERM=dumb",
		"NO_COLOR=1",
		"SHELL=/bin/sh",
		EnvAPIKey + "=" + apiKey,
	}
}

func readFile(name string) string {
	b, _ := os.ReadFile(name)
	return string(b)
}
