package httpapi

import (
	"net/url"
	"path"
	"strings"
	"testing"
)

// muxPath says the same path as it was given (it decodes back to it),
// and says it cleanly: ServeMux's cleaning (path.Clean, keeping a
// trailing slash) leaves it as it is, so it is never redirected.
func FuzzMuxPath(f *testing.F) {
	for _, p := range []string{"/", "//", "///", "/a", "/a/", "/a//", "/a//b", "//a", "/.", "/..", "/a/.", "/a/..", "/a/./b",
		"/a/../b", "/a/.../b", "/a%2Fb", "/a b/c?d#e", "/api/v1/models/vendor/chat", "/api/v1/models//x/../y/"} {
		f.Add(p)
	}
	f.Fuzz(func(t *testing.T, p string) {
		if !strings.HasPrefix(p, "/") {
			return
		}
		e := muxPath(p)
		if got, err := url.PathUnescape(e); err != nil || got != p {
			t.Errorf("muxPath(%q) = %q, which decodes to %q (%v)", p, e, got, err)
		}
		clean := path.Clean(e)
		if strings.HasSuffix(e, "/") && clean != "/" {
			clean += "/"
		}
		if clean != e {
			t.Errorf("muxPath(%q) = %q, which ServeMux cleans to %q", p, e, clean)
		}
	})
}
