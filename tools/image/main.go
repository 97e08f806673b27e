// Command image builds buzzgate's container image without a container
// engine (`make image`), from static gateway binaries built for linux/amd64
// and linux/arm64: an OCI image index of the two, written as an OCI image
// layout in a tar file (what `skopeo copy oci-archive:...`, `podman load`
// and containerd's `ctr images import` read), and, for each platform, a
// tar file in `docker save`'s format (what `docker load` reads).
//
// The image holds what the Dockerfile's does, on an empty base (nothing is
// pulled): the binary at /buzzgate, the build machine's CA certificates
// (/etc/ssl/certs/ca-certificates.crt, Debian's ca-certificates), an
// /etc/passwd and /etc/group naming the user nonroot (65532, which it runs
// as), a /tmp, and the tokenizer's vocabularies under /tokenizer. The
// gateway serves on 0.0.0.0:8080 with the embedded demo config unless
// BUZZGATE_CONFIG names a mounted file.
//
// Every timestamp is SOURCE_DATE_EPOCH (0 when unset), so that the same
// inputs give the same bytes, and so the same digests.
package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The image's user: distroless's nonroot.
const (
	uid      = 65532
	user     = "65532:65532"
	port     = "8080"
	binPath  = "/buzzgate"
	vocabDir = "/tokenizer"
	certs    = "/etc/ssl/certs/ca-certificates.crt"
)

// Options are an image's inputs.
type Options struct {
	// Binaries are the static gateway binaries, by GOARCH (amd64, arm64).
	Binaries map[string]string
	// TokenizerDir holds the vocabularies (*.json).
	TokenizerDir string
	// Certs is the CA certificates bundle to copy.
	Certs string
	// Created stamps every file, layer and config.
	Created time.Time
}

// Build returns the image index (one image per binary, by platform) and
// its images, by GOARCH.
func Build(o Options) (v1.ImageIndex, map[string]v1.Image, error) {
	base, err := baseLayer(o)
	if err != nil {
		return nil, nil, err
	}
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	images := map[string]v1.Image{}
	arches := make([]string, 0, len(o.Binaries))
	for a := range o.Binaries {
		arches = append(arches, a)
	}
	slices.Sort(arches)
	for _, arch := range arches {
		bin, err := os.ReadFile(o.Binaries[arch])
		if err != nil {
			return nil, nil, err
		}
		binLayer, err := layer([]entry{{name: binPath, mode: 0o755, data: bin}}, o.Created)
		if err != nil {
			return nil, nil, err
		}
		platform := v1.Platform{OS: "linux", Architecture: arch}
		if arch == "arm64" {
			platform.Variant = "v8"
		}
		img := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
		created := v1.Time{Time: o.Created}
		img, err = mutate.Append(img,
			mutate.Addendum{Layer: base, MediaType: types.OCILayer, History: v1.History{Created: created, CreatedBy: "buzzgate: CA certificates, passwd, tokenizer vocabularies"}},
			mutate.Addendum{Layer: binLayer, MediaType: types.OCILayer, History: v1.History{Created: created, CreatedBy: "buzzgate: the gateway binary"}})
		if err != nil {
			return nil, nil, err
		}
		cf, err := img.ConfigFile()
		if err != nil {
			return nil, nil, err
		}
		cf = cf.DeepCopy()
		cf.Created = created
		cf.OS, cf.Architecture, cf.Variant = platform.OS, platform.Architecture, platform.Variant
		cf.Config = v1.Config{
			User:       user,
			Entrypoint: []string{binPath},
			WorkingDir: "/",
			Env: []string{
				"BUZZGATE_ADDR=0.0.0.0:" + port,
				"BUZZGATE_TOKENIZER_DIR=" + vocabDir,
			},
			ExposedPorts: map[string]struct{}{port + "/tcp": {}},
			StopSignal:   "SIGTERM",
			Labels: map[string]string{
				"org.opencontainers.image.title":    "buzzgate",
				"org.opencontainers.image.licenses": "Apache-2.0",
			},
		}
		if img, err = mutate.ConfigFile(img, cf); err != nil {
			return nil, nil, err
		}
		images[arch] = img
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{
			MediaType: types.OCIManifestSchema1, Platform: &platform,
		}})
	}
	return idx, images, nil
}

// baseLayer holds everything but the binary: the same for every platform.
func baseLayer(o Options) (v1.Layer, error) {
	ca, err := os.ReadFile(o.Certs)
	if err != nil {
		return nil, fmt.Errorf("CA certificates: %w", err)
	}
	files := []entry{
		{name: "/etc/", dir: true, mode: 0o755},
		{name: "/etc/passwd", mode: 0o644, data: []byte("root:x:0:0:root:/root:/sbin/nologin\n" +
			"nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n" +
			"nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n")},
		{name: "/etc/group", mode: 0o644, data: []byte("root:x:0:\nnobody:x:65534:\nnonroot:x:65532:\n")},
		{name: "/etc/nsswitch.conf", mode: 0o644, data: []byte("hosts: files dns\n")},
		{name: "/etc/ssl/", dir: true, mode: 0o755},
		{name: "/etc/ssl/certs/", dir: true, mode: 0o755},
		{name: certs, mode: 0o644, data: ca},
		{name: "/home/", dir: true, mode: 0o755},
		{name: "/home/nonroot/", dir: true, mode: 0o700, owner: uid},
		{name: "/tmp/", dir: true, mode: 0o1777},
		{name: vocabDir + "/", dir: true, mode: 0o755},
	}
	vocabs, err := filepath.Glob(filepath.Join(o.TokenizerDir, "*.json"))
	if err != nil {
		return nil, err
	}
	if len(vocabs) == 0 {
		return nil, fmt.Errorf("no tokenizer vocabularies (*.json) in %q: make tools installs them", o.TokenizerDir)
	}
	slices.Sort(vocabs)
	for _, v := range vocabs {
		b, err := os.ReadFile(v)
		if err != nil {
			return nil, err
		}
		files = append(files, entry{name: vocabDir + "/" + filepath.Base(v), mode: 0o644, data: b})
	}
	return layer(files, o.Created)
}

// entry is one file or directory of a layer.
type entry struct {
	name  string
	dir   bool
	mode  int64
	owner int
	data  []byte
}

// layer is a gzipped tar of files, compressed once.
func layer(files []entry, created time.Time) (v1.Layer, error) {
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, f := range files {
		h := &tar.Header{
			Name: strings.TrimPrefix(f.name, "/"), Mode: f.mode, ModTime: created,
			Uid: f.owner, Gid: f.owner, Typeflag: tar.TypeReg, Size: int64(len(f.data)), Format: tar.FormatPAX,
		}
		if f.dir {
			h.Typeflag, h.Size = tar.TypeDir, 0
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := gz.Close(); err != nil {
		return nil, err
	}
	b := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(b)), nil
	}, tarball.WithMediaType(types.OCILayer))
}

// WriteOCIArchive writes idx as an OCI image layout in a tar file at path
// (through a temporary file, so a reader never sees half of one), tagged
// as ref (e.g. buzzgate:latest).
func WriteOCIArchive(path string, idx v1.ImageIndex, ref name.Tag, created time.Time) error {
	dir, err := os.MkdirTemp("", "buzzgate-image-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	if err := p.AppendIndex(idx, layout.WithAnnotations(map[string]string{
		"org.opencontainers.image.ref.name": ref.TagStr(),
		// containerd names images as docker.io/library/NAME:TAG.
		"io.containerd.image.name": strings.Replace(ref.Name(), name.DefaultRegistry+"/", "docker.io/", 1),
	})); err != nil {
		return err
	}
	return writeFile(path, func(w io.Writer) error { return tarDir(w, dir, created) })
}

// tarDir writes dir's files to w as a tar, in name order, stamped created.
func tarDir(w io.Writer, dir string, created time.Time) error {
	tw := tar.NewWriter(w)
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || path == dir {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		h := &tar.Header{Name: filepath.ToSlash(rel), ModTime: created, Mode: 0o644, Typeflag: tar.TypeReg, Format: tar.FormatPAX}
		if d.IsDir() {
			h.Name, h.Mode, h.Typeflag = h.Name+"/", 0o755, tar.TypeDir
			return tw.WriteHeader(h)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		h.Size = int64(len(b))
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		_, err = tw.Write(b)
		return err
	})
	if err != nil {
		return err
	}
	return tw.Close()
}

// WriteDockerArchive writes img at path in `docker save`'s format, tagged
// as ref.
func WriteDockerArchive(path string, img v1.Image, ref name.Tag) error {
	return writeFile(path, func(w io.Writer) error { return tarball.Write(ref, img, w) })
}

func writeFile(path string, write func(io.Writer) error) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".*.tmp")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if err := write(f); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Chmod(f.Name(), 0o644); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}

// DockerArchivePath is where the docker-format tar of arch goes, beside
// the OCI one: bin/buzzgate-image.tar gives bin/buzzgate-image-amd64.docker.tar.
func DockerArchivePath(ociPath, arch string) string {
	return strings.TrimSuffix(ociPath, ".tar") + "-" + arch + ".docker.tar"
}

// SourceDate is SOURCE_DATE_EPOCH's time, or the Unix epoch.
func SourceDate(getenv func(string) string) (time.Time, error) {
	v := getenv("SOURCE_DATE_EPOCH")
	if v == "" {
		return time.Unix(0, 0).UTC(), nil
	}
	s, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("SOURCE_DATE_EPOCH=%q: want seconds since the epoch", v)
	}
	return time.Unix(s, 0).UTC(), nil
}

func main() {
	amd64 := flag.String("amd64", "", "the static gateway binary for linux/amd64")
	arm64 := flag.String("arm64", "", "the static gateway binary for linux/arm64")
	vocab := flag.String("tokenizer", ".tools/tokenizer", "the directory holding the tokenizer's vocabularies")
	ca := flag.String("certs", certs, "the CA certificates bundle to copy into the image")
	out := flag.String("out", "bin/buzzgate-image.tar", "the OCI layout tar to write; the docker-format ones go beside it")
	tag := flag.String("tag", "buzzgate:latest", "the image's name")
	flag.Parse()
	if err := run(*amd64, *arm64, *vocab, *ca, *out, *tag); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

func run(amd64, arm64, vocab, ca, out, tag string) error {
	bins := map[string]string{}
	for arch, p := range map[string]string{"amd64": amd64, "arm64": arm64} {
		if p != "" {
			bins[arch] = p
		}
	}
	if len(bins) == 0 {
		return fmt.Errorf("no binary: give -amd64, -arm64 or both")
	}
	ref, err := name.NewTag(tag)
	if err != nil {
		return err
	}
	created, err := SourceDate(os.Getenv)
	if err != nil {
		return err
	}
	idx, images, err := Build(Options{Binaries: bins, TokenizerDir: vocab, Certs: ca, Created: created})
	if err != nil {
		return err
	}
	if err := WriteOCIArchive(out, idx, ref, created); err != nil {
		return err
	}
	for arch, img := range images {
		if err := WriteDockerArchive(DockerArchivePath(out, arch), img, ref); err != nil {
			return err
		}
	}
	d, err := idx.Digest()
	if err != nil {
		return err
	}
	fmt.Printf("%s: %s, index %s\n", out, tag, d)
	return nil
}
