//go:build integration

package main

import (
	"archive/tar"
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/buzzgate/buzzgate/internal/proc"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// TestImage builds the image as `make image` does (the Lambda build's
// binaries, for both platforms), opens the OCI archive it writes, checks
// the index's platforms and the images' configs, then extracts the image
// of this machine's platform and runs its entrypoint in it (chrooted, as
// its user, with its environment) with the embedded demo config: /healthz
// answers, the README's chat completion with the demo key is a 200, and
// SIGTERM stops it with exit status 0.
func TestImage(t *testing.T) {
	root, err := proc.ModuleRoot() // tools/
	if err != nil {
		t.Fatal(err)
	}
	repo := filepath.Dir(root)
	vocab, err := proc.Tool("BUZZGATE_TOKENIZER_DIR", "../.tools/tokenizer", "the tokenizer's vocabularies are missing: run make tools")
	if err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	bins := map[string]string{}
	for _, arch := range []string{"amd64", "arm64"} {
		bins[arch] = filepath.Join(work, "linux-"+arch, "buzzgate")
		// The Makefile's LAMBDA_BUILD, so that Go's build cache serves
		// what make image and the Lambda build compiled.
		cmd := exec.Command("go", "build", "-tags", "lambda.norpc", "-trimpath", "-ldflags=-s -w", "-o", bins[arch], "./functions/api")
		cmd.Dir = repo
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+arch)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("build linux/%s: %v\n%s", arch, err, out)
		}
	}
	out := filepath.Join(work, "buzzgate-image.tar")
	if err := run(bins["amd64"], bins["arm64"], vocab, certs, out, "buzzgate:test"); err != nil {
		t.Fatal(err)
	}

	// The OCI archive: an index of both platforms, each image non-root.
	dir := filepath.Join(work, "layout")
	untar(t, out, dir)
	outer, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	outerManifest, err := outer.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(outerManifest.Manifests) != 1 || outerManifest.Manifests[0].Annotations["org.opencontainers.image.ref.name"] != "test" {
		t.Fatalf("index.json: %+v", outerManifest.Manifests)
	}
	idx, err := outer.ImageIndex(outerManifest.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	var platforms []string
	var host v1.Image
	for _, d := range im.Manifests {
		platforms = append(platforms, d.Platform.OS+"/"+d.Platform.Architecture)
		img, err := idx.Image(d.Digest)
		if err != nil {
			t.Fatal(err)
		}
		cf, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		if cf.OS != d.Platform.OS || cf.Architecture != d.Platform.Architecture {
			t.Errorf("%s: config's platform %s/%s", d.Digest, cf.OS, cf.Architecture)
		}
		if u := cf.Config.User; u == "" || strings.HasPrefix(u, "0") || strings.HasPrefix(u, "root") {
			t.Errorf("%s/%s runs as user %q, want a non-root uid", cf.OS, cf.Architecture, u)
		}
		if _, ok := cf.Config.ExposedPorts["8080/tcp"]; !ok || !slices.Equal(cf.Config.Entrypoint, []string{"/buzzgate"}) {
			t.Errorf("%s/%s: ports %v, entrypoint %v", cf.OS, cf.Architecture, cf.Config.ExposedPorts, cf.Config.Entrypoint)
		}
		if d.Platform.Architecture == runtime.GOARCH {
			host = img
		}
		// The docker-format archive beside it holds the same image.
		dimg, err := tarball.ImageFromPath(DockerArchivePath(out, d.Platform.Architecture), nil)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := img.ConfigName()
		if got, err := dimg.ConfigName(); err != nil || got != want {
			t.Errorf("%s docker archive: config %v (%v), want %v", d.Platform.Architecture, got, err, want)
		}
	}
	slices.Sort(platforms)
	if !slices.Equal(platforms, []string{"linux/amd64", "linux/arm64"}) {
		t.Fatalf("the index's platforms: %v", platforms)
	}
	if host == nil {
		t.Fatalf("no image for this machine's linux/%s", runtime.GOARCH)
	}

	// This platform's file system, as a container runtime lays it out.
	rootfs := filepath.Join(work, "rootfs")
	extract(t, mutate.Extract(host), rootfs)
	for _, f := range []string{"buzzgate", "etc/ssl/certs/ca-certificates.crt", "tokenizer/o200k_base.json", "tokenizer/cl100k_base.json"} {
		if _, err := os.Stat(filepath.Join(rootfs, f)); err != nil {
			t.Error(err)
		}
	}
	passwd, err := os.ReadFile(filepath.Join(rootfs, "etc/passwd"))
	if err != nil || !strings.Contains(string(passwd), "nonroot:x:65532:65532:") {
		t.Errorf("/etc/passwd: %q %v", passwd, err)
	}

	cf, err := host.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	addr, err := proc.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(cf.Config.Entrypoint[0])
	// The image's environment, but for the address: a loopback port of
	// this machine's, where the container would listen on 0.0.0.0:8080.
	cmd.Env = append(slices.Clone(cf.Config.Env), "BUZZGATE_ADDR="+addr)
	cmd.Dir = "/"
	uid, gid := userIDs(t, cf.Config.User)
	if os.Geteuid() == 0 {
		cmd.SysProcAttr = &syscall.SysProcAttr{Chroot: rootfs, Credential: &syscall.Credential{Uid: uid, Gid: gid}}
	} else {
		// Without root there is no chroot: the entrypoint and the
		// image's paths are read from the extracted tree instead.
		cmd.Path = filepath.Join(rootfs, cf.Config.Entrypoint[0])
		for i, kv := range cmd.Env {
			if k, v, _ := strings.Cut(kv, "="); strings.HasPrefix(v, "/") {
				cmd.Env[i] = k + "=" + filepath.Join(rootfs, v)
			}
		}
	}
	logs := &proc.SyncBuffer{}
	cmd.Stderr = logs
	p, err := proc.Start(cmd)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.Stop(0)
		if t.Failed() {
			t.Logf("the image's gateway logged:\n%s", logs.String())
		}
	})
	base := "http://" + addr
	if err := p.WaitReady(15*time.Second, proc.HTTPOK(base+"/healthz")); err != nil {
		t.Fatalf("the image's entrypoint did not serve /healthz: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/api/v1/chat/completions",
		strings.NewReader(`{"model":"demo/chat","messages":[{"role":"user","content":"Hello"}]}`))
	req.Header.Set("Authorization", "Bearer sk-demo")
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"chat.completion"`) {
		t.Fatalf("chat completion: %d %s", resp.StatusCode, body)
	}

	if err := p.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.Exited():
		if err := p.Err(); err != nil {
			t.Errorf("exit after SIGTERM: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the gateway did not stop within 20s of SIGTERM")
	}
	if l := logs.String(); !strings.Contains(l, `"msg":"request"`) {
		t.Errorf("the image's gateway logged:\n%s", l)
	}
}

// TestImageIsReproducible: the same inputs give the same bytes, so make
// image run twice writes the same archives (and digests).
func TestImageIsReproducible(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	vocab := filepath.Join(dir, "vocab")
	if err := os.WriteFile(bin, []byte("#!/bin/false\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(vocab, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(vocab, "o200k_base.json"), []byte(`{}`), 0o644); err != nil {
		t.Fatal(err)
	}
	var sums []string
	for i := range 2 {
		out := filepath.Join(dir, strconv.Itoa(i), "image.tar")
		if err := run(bin, bin, vocab, certs, out, "buzzgate:latest"); err != nil {
			t.Fatal(err)
		}
		for _, p := range []string{out, DockerArchivePath(out, "amd64"), DockerArchivePath(out, "arm64")} {
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			sums = append(sums, string(b))
		}
	}
	for i := range 3 {
		if sums[i] != sums[i+3] {
			t.Errorf("archive %d differs between two builds of the same inputs", i)
		}
	}
}

// userIDs parses a config's "uid:gid".
func userIDs(t *testing.T, user string) (uint32, uint32) {
	t.Helper()
	u, g, _ := strings.Cut(user, ":")
	uid, err1 := strconv.ParseUint(u, 10, 32)
	gid, err2 := strconv.ParseUint(g, 10, 32)
	if err := errors.Join(err1, err2); err != nil {
		t.Fatalf("user %q: want uid:gid: %v", user, err)
	}
	return uint32(uid), uint32(gid)
}

// untar extracts the tar file at path into dir.
func untar(t *testing.T, path, dir string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	extract(t, f, dir)
}

// extract writes a tar's regular files and directories under dir, with
// their modes and owners (a layer's /tmp, /home/nonroot); links and
// anything else fail the test, as nothing else belongs in the image.
func extract(t *testing.T, r io.Reader, dir string) {
	t.Helper()
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, filepath.FromSlash(h.Name))
		if !strings.HasPrefix(p, filepath.Clean(dir)+string(filepath.Separator)) {
			t.Fatalf("tar entry %q leaves its directory", h.Name)
		}
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := io.Copy(f, tr); err != nil {
				t.Fatal(err)
			}
			if err := f.Close(); err != nil {
				t.Fatal(err)
			}
		default:
			t.Fatalf("tar entry %q of type %c", h.Name, h.Typeflag)
		}
		if err := os.Chmod(p, os.FileMode(h.Mode).Perm()|modeBits(h.Mode)); err != nil {
			t.Fatal(err)
		}
		if os.Geteuid() == 0 {
			if err := os.Lchown(p, h.Uid, h.Gid); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// modeBits are a tar mode's sticky, setuid and setgid bits as os.FileMode's.
func modeBits(m int64) os.FileMode {
	var fm os.FileMode
	if m&0o1000 != 0 {
		fm |= os.ModeSticky
	}
	if m&0o2000 != 0 {
		fm |= os.ModeSetgid
	}
	if m&0o4000 != 0 {
		fm |= os.ModeSetuid
	}
	return fm
}
