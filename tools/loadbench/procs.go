package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/buzzgate/buzzgate/internal/proc"
)

// gatewayKey is the bearer key of the benchmark's project.
const gatewayKey = "sk-loadbench"

// gatewayModel is the model clients name through the gateway; upstreamModel
// is the name the gateway (and a direct client) sends the mock.
const (
	gatewayModel  = "bench/chat"
	upstreamModel = "mock-model"
)

// productModule is the gateway's module, which the tools module requires
// (replaced by the directory above it).
const productModule = "github.com/buzzgate/buzzgate"

// repoRoot is the product module's directory, as the go command resolves it
// from the working directory (the repository or its tools module).
func repoRoot() (string, error) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", productModule).Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			err = fmt.Errorf("%w: %s", err, bytes.TrimSpace(ee.Stderr))
		}
		return "", fmt.Errorf("find %s (run from the repository): %w", productModule, err)
	}
	return strings.TrimSpace(string(out)), nil
}

// buildBinary builds the main package pkg of the module in modDir into dir
// with `make build`'s flags and the build tags given (pprof: the gateway's
// BUZZGATE_PPROF_ADDR). Each binary is built in its own module, so the
// gateway gets the product's dependency versions.
func buildBinary(dir, modDir, pkg, name string, tags ...string) (string, error) {
	out := filepath.Join(dir, name)
	args := []string{"build", "-trimpath", "-o", out}
	if len(tags) > 0 {
		args = append(args, "-tags", strings.Join(tags, ","))
	}
	cmd := exec.Command("go", append(args, pkg)...)
	cmd.Dir = modDir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("go build %s: %w", pkg, err)
	}
	return out, nil
}

// stopGrace is how long a child has to exit after SIGTERM before SIGKILL.
const stopGrace = 3 * time.Second

// startMock starts the mock upstream and returns it with its address.
func startMock(bin string, flushEach bool, chunkWords int) (*proc.Process, string, error) {
	args := []string{"-addr", "127.0.0.1:0", "-chunk-words", strconv.Itoa(chunkWords)}
	if flushEach {
		args = append(args, "-flush-each")
	}
	cmd := exec.Command(bin, args...)
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, "", err
	}
	p, err := proc.Start(cmd)
	if err != nil {
		return nil, "", fmt.Errorf("mock upstream: %w", err)
	}
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if a, ok := strings.CutPrefix(sc.Text(), "listening "); ok {
				addr <- a
			}
		}
		io.Copy(io.Discard, stdout)
	}()
	select {
	case a := <-addr:
		return p, a, nil
	case <-p.Exited():
		return nil, "", fmt.Errorf("mock upstream exited: %v", p.Err())
	case <-time.After(10 * time.Second):
		p.Stop(stopGrace)
		return nil, "", errors.New("mock upstream did not start within 10s")
	}
}

// gatewayConfig is the gateway's config: one openai provider (the mock),
// one model, one project with one key.
func gatewayConfig(mockAddr string) string {
	return fmt.Sprintf(`# written by tools/loadbench
providers:
  - name: mock
    api: openai
    base_url: http://%s/v1
models:
  - id: %s
    routes:
      - provider: mock
        model: %s
        input_price: 0.15
        output_price: 0.60
projects:
  - id: loadbench
    keys:
      - key: %s
`, mockAddr, gatewayModel, upstreamModel, gatewayKey)
}

type gatewayOpts struct {
	bin, dir, mockAddr, logLevel, pprofAddr string
}

// startGateway writes the config and starts the gateway as the local HTTP
// server with the memory store, its log in dir/gateway.log, and waits until
// /healthz answers.
func startGateway(o gatewayOpts) (*proc.Process, string, error) {
	cfg := filepath.Join(o.dir, "config.yaml")
	if err := os.WriteFile(cfg, []byte(gatewayConfig(o.mockAddr)), 0o600); err != nil {
		return nil, "", err
	}
	addr, err := proc.FreeAddr()
	if err != nil {
		return nil, "", err
	}
	logf, err := os.Create(filepath.Join(o.dir, "gateway.log"))
	if err != nil {
		return nil, "", err
	}
	defer logf.Close() // the child has its own descriptor
	cmd := exec.Command(o.bin)
	cmd.Env = []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + os.Getenv("HOME"),
		"BUZZGATE_ADDR=" + addr,
		"BUZZGATE_STORE=memory",
		"BUZZGATE_CONFIG=" + cfg,
		"BUZZGATE_METRICS=off",
		"BUZZGATE_LOG_LEVEL=" + o.logLevel,
	}
	if o.pprofAddr != "" {
		cmd.Env = append(cmd.Env, "BUZZGATE_PPROF_ADDR="+o.pprofAddr)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	p, err := proc.Start(cmd)
	if err != nil {
		return nil, "", fmt.Errorf("gateway: %w", err)
	}
	if err := p.WaitReady(15*time.Second, proc.HTTPOK("http://"+addr+"/healthz")); err != nil {
		p.Stop(stopGrace)
		log, _ := os.ReadFile(filepath.Join(o.dir, "gateway.log"))
		return nil, "", fmt.Errorf("gateway: %w: %s", err, bytes.TrimSpace(log))
	}
	return p, addr, nil
}

// statusKB reads one "Vm...:   N kB" line of /proc/<pid>/status.
func statusKB(pid int, field string) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			return strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		}
	}
	return 0, fmt.Errorf("/proc/%d/status has no %s", pid, field)
}

// cpuTime reads a process's CPU time so far (user + system, all its
// threads) from /proc/<pid>/stat, in the kernel's USER_HZ ticks (100 a
// second on Linux).
func cpuTime(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	return parseStatCPU(string(b))
}

// parseStatCPU takes utime and stime (fields 14 and 15) from a
// /proc/<pid>/stat line; the command name (field 2) may hold spaces and
// parentheses, so the fields are counted from its last ')'.
func parseStatCPU(stat string) (time.Duration, error) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, errors.New("/proc stat line without a command name")
	}
	f := strings.Fields(stat[i+1:]) // f[0] is field 3
	if len(f) < 13 {
		return 0, errors.New("/proc stat line too short")
	}
	var ticks int64
	for _, v := range f[11:13] {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc stat: %w", err)
		}
		ticks += n
	}
	const userHZ = 100
	return time.Duration(ticks) * (time.Second / userHZ), nil
}

// rssMeter reports a process's peak RSS per phase: reset clears the peak
// (VmHWM) by writing 5 to /proc/<pid>/clear_refs, peak reads it. When the
// reset is not allowed here, peak is the peak since the process started,
// and resets says so.
type rssMeter struct {
	pid     int
	resets  bool
	overall int64 // KiB, the largest peak read
}

func newRSSMeter(pid int) *rssMeter {
	m := &rssMeter{pid: pid}
	m.resets = m.reset() == nil
	return m
}

func (m *rssMeter) reset() error {
	return os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", m.pid), []byte("5"), 0)
}

// peak returns the peak RSS in KiB since the last reset, 0 if unknown.
func (m *rssMeter) peak() int64 {
	kb, err := statusKB(m.pid, "VmHWM")
	if err != nil {
		return 0
	}
	m.overall = max(m.overall, kb)
	return kb
}

// binaryID describes a binary: the commit it was built from when it says
// (vcs.revision, vcs.modified), else "no vcs stamp", with a SHA-256 prefix.
func binaryID(path string) string {
	sum := "?"
	if b, err := os.ReadFile(path); err == nil {
		h := sha256.Sum256(b)
		sum = hex.EncodeToString(h[:6])
	}
	rev, dirty, goVer := "", false, ""
	if bi, err := buildinfo.ReadFile(path); err == nil {
		goVer = bi.GoVersion
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				dirty = s.Value == "true"
			}
		}
	}
	id := "no vcs stamp"
	if rev != "" {
		id = rev[:min(len(rev), 7)]
		if dirty {
			id += "-dirty"
		}
	}
	return fmt.Sprintf("%s (%s, sha256 %s)", id, goVer, sum)
}

// gitCommit is the short HEAD of the worktree holding dir, with -dirty when
// it has changes.
func gitCommit(dir string) string {
	git := func(args ...string) ([]byte, error) {
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		return cmd.Output()
	}
	out, err := git("rev-parse", "--short", "HEAD")
	if err != nil {
		return "unknown"
	}
	c := strings.TrimSpace(string(out))
	if st, err := git("status", "--porcelain", "--untracked-files=no"); err == nil && len(bytes.TrimSpace(st)) > 0 {
		c += "-dirty"
	}
	return c
}

// fetchProfiles fetches a CPU profile and an allocation (delta) profile of
// d from the gateway's pprof listener into dir, while the caller runs load.
func fetchProfiles(ctx context.Context, pprofAddr, dir, prefix string, d time.Duration) <-chan error {
	secs := strconv.Itoa(max(1, int(d.Round(time.Second)/time.Second)))
	errc := make(chan error, 2)
	for _, p := range []struct{ path, file string }{
		{"/debug/pprof/profile?seconds=" + secs, prefix + "cpu.pprof"},
		{"/debug/pprof/allocs?seconds=" + secs, prefix + "allocs.pprof"},
	} {
		go func() {
			errc <- func() error {
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+pprofAddr+p.path, nil)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					return err
				}
				defer resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					return fmt.Errorf("%s: status %d", p.path, resp.StatusCode)
				}
				f, err := os.Create(filepath.Join(dir, p.file))
				if err != nil {
					return err
				}
				if _, err := io.Copy(f, resp.Body); err != nil {
					f.Close()
					return err
				}
				return f.Close()
			}()
		}()
	}
	return errc
}
