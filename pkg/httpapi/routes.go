package httpapi

import (
	"net/http"
	"net/url"
	"strings"

	"github.com/buzzgate/buzzgate/pkg/clientapi"
	"github.com/buzzgate/buzzgate/pkg/clientapi/chat"
	"github.com/buzzgate/buzzgate/pkg/clientapi/messages"
	"github.com/buzzgate/buzzgate/pkg/llm"
)

// exchange is one request as its handler sees it: the response writer,
// which records the status for the log line, the request's id, and what
// the handler adds to the log line. It is the http.ResponseWriter the mux
// hands each endpoint, which passes &Recorder on (clientapi's error writers
// record the error's code in it).
type exchange struct {
	clientapi.Recorder
	id   string
	info logInfo
	// idValue is the X-Request-Id header's value slice.
	idValue [1]string
}

// endpoint is a handler of the mux: its ResponseWriter is the request's
// *exchange.
type endpoint func(x *exchange, r *http.Request)

func (f endpoint) ServeHTTP(w http.ResponseWriter, r *http.Request) { f(w.(*exchange), r) }

// routes is the handler's table of endpoints. Each endpoint is a method
// pattern; the same path without a method answers its other methods, 405
// in its API's envelope with an Allow header (ServeMux serves HEAD with a
// GET pattern, so an endpoint without HEAD says so). Paths under the
// Messages API's prefix that are no endpoint are its 404, any other its
// OpenAI-shaped 404 ("/"). ServeMux's own 404 and 405 are plain text, so
// every path matches one of these patterns. The key is checked by each
// endpoint, after routing.
func (s *Server) routes() *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle("POST /api/v1/chat/completions", endpoint(func(x *exchange, r *http.Request) {
		x.info.chat = true
		s.generate(&x.Recorder, r, x.id, &x.info.Log, chat.API)
	}))
	mux.Handle("/api/v1/chat/completions", notAllowed(clientapi.WriteError, "POST"))
	mux.Handle("POST /api/v1/responses", endpoint(func(x *exchange, r *http.Request) {
		x.info.chat = true
		s.generate(&x.Recorder, r, x.id, &x.info.Log, s.responses)
	}))
	mux.Handle("/api/v1/responses", notAllowed(clientapi.WriteError, "POST"))
	mux.Handle("GET /api/v1/responses/{id...}", recorded(s.getResponse))
	mux.Handle("HEAD /api/v1/responses/{id...}", notAllowed(clientapi.WriteError, "GET"))
	mux.Handle("/api/v1/responses/{id...}", notAllowed(clientapi.WriteError, "GET"))

	mux.Handle("POST /api/v1/messages", endpoint(func(x *exchange, r *http.Request) {
		x.info.chat = true
		s.generate(&x.Recorder, r, x.id, &x.info.Log, messages.API)
	}))
	mux.Handle("/api/v1/messages", notAllowed(clientapi.WriteAnthropicError, "POST"))
	mux.Handle("POST /api/v1/messages/count_tokens", endpoint(func(x *exchange, r *http.Request) {
		s.countTokens(&x.Recorder, r, &x.info.Log)
	}))
	mux.Handle("/api/v1/messages/count_tokens", notAllowed(clientapi.WriteAnthropicError, "POST"))
	mux.Handle("/api/v1/messages/", notFound(clientapi.WriteAnthropicError))

	// The models endpoints answer in the envelope of the API the client
	// speaks (modelsErrors), their 405 too.
	mux.Handle("GET /api/v1/models", recorded(s.serveModelList))
	mux.Handle("GET /api/v1/models/{id...}", recorded(s.serveModel))
	modelsNotAllowed := recorded(func(w *clientapi.Recorder, r *http.Request) {
		errorf := modelsErrors(w, r)
		w.Header().Set("Allow", "GET, HEAD")
		errorf(w, llm.Errorf(llm.CodeMethodNotAllowed, "", "method not allowed; use GET, HEAD"))
	})
	mux.Handle("/api/v1/models", modelsNotAllowed)
	mux.Handle("/api/v1/models/{id...}", modelsNotAllowed)

	mux.Handle("POST /api/v1/feedback", recorded(s.feedback))
	mux.Handle("/api/v1/feedback", notAllowed(clientapi.WriteError, "POST"))
	mux.Handle("GET /api/v1/usage", recorded(s.usage))
	mux.Handle("HEAD /api/v1/usage", notAllowed(clientapi.WriteError, "GET"))
	mux.Handle("/api/v1/usage", notAllowed(clientapi.WriteError, "GET"))

	mux.Handle("/healthz", recorded(func(w *clientapi.Recorder, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		w.Write([]byte("ok\n"))
	}))
	mux.Handle("/", notFound(clientapi.WriteError))
	return mux
}

// recorded is an endpoint that needs only the response writer.
func recorded(h func(*clientapi.Recorder, *http.Request)) endpoint {
	return func(x *exchange, r *http.Request) { h(&x.Recorder, r) }
}

// errorWriter writes an error in one API's envelope
// (clientapi.WriteError, clientapi.WriteAnthropicError).
type errorWriter func(http.ResponseWriter, error) int

// notAllowed answers a method an endpoint does not serve: a 405 with the
// one it does in Allow.
func notAllowed(errorf errorWriter, allow string) endpoint {
	return recorded(func(w *clientapi.Recorder, r *http.Request) {
		w.Header().Set("Allow", allow)
		errorf(w, llm.Errorf(llm.CodeMethodNotAllowed, "", "method not allowed; use %s", allow))
	})
}

// notFound answers a path that is no endpoint.
func notFound(errorf errorWriter) endpoint {
	return recorded(func(w *clientapi.Recorder, r *http.Request) { writeNotFound(w, r, errorf) })
}

func writeNotFound(w *clientapi.Recorder, r *http.Request, errorf errorWriter) {
	errorf(w, llm.Errorf(llm.CodeNotFound, "", "no such endpoint: %s %s", r.Method, clientapi.Sanitize(r.URL.Path)))
}

// errorsFor is the envelope of the API a request's path belongs to, for
// an error written outside its endpoint (a panic): the Messages
// API's under its prefix and, for a client that sends anthropic-version,
// on the models endpoints; OpenAI's elsewhere.
func errorsFor(r *http.Request) errorWriter {
	p := r.URL.Path
	if p == "/api/v1/messages" || strings.HasPrefix(p, "/api/v1/messages/") ||
		(p == "/api/v1/models" || strings.HasPrefix(p, "/api/v1/models/")) && r.Header.Get("Anthropic-Version") != "" {
		return clientapi.WriteAnthropicError
	}
	return clientapi.WriteError
}

// dispatch routes r to its endpoint. The gateway routes the path as it
// decodes (r.URL.Path), segment by segment, as it comes: an escaped slash
// is a slash, and a path with an empty, "." or ".." segment is matched as
// it is, never cleaned nor redirected. ServeMux matches the escaped path
// and redirects one that is not clean, so such a request is routed by a
// path escaped to say the same thing cleanly (muxPath).
func (s *Server) dispatch(x *exchange, r *http.Request) {
	p := r.URL.Path
	if !strings.HasPrefix(p, "/") {
		// "*" (asterisk-form) or nothing (absolute-form without a path).
		writeNotFound(&x.Recorder, r, clientapi.WriteError)
		return
	}
	if r.URL.RawPath != "" || !cleanPath(p) {
		r2, u := *r, *r.URL
		u.RawPath = muxPath(p)
		r2.URL = &u
		r = &r2
	}
	s.mux.ServeHTTP(x, r)
}

// cleanPath reports whether path p (which starts with a slash) has no
// empty segment but a last one, and no "." or ".." segment.
func cleanPath(p string) bool {
	for i := 0; i < len(p); i++ {
		if p[i] != '/' {
			continue
		}
		seg, _, more := strings.Cut(p[i+1:], "/")
		if seg == "" && more || seg == "." || seg == ".." {
			return false
		}
	}
	return true
}

// muxPath is path p escaped so that ServeMux finds it clean and matches
// its segments literally: each segment escaped alone (so a slash in none),
// the dots of a "." or ".." segment escaped, and the slash after an empty
// segment escaped into the next one ("/a//b" is "/a/%2Fb").
func muxPath(p string) string {
	var b strings.Builder
	segs := strings.Split(p[1:], "/")
	for i, seg := range segs {
		if i > 0 && segs[i-1] == "" {
			b.WriteString("%2F")
		} else {
			b.WriteByte('/')
		}
		switch seg {
		case ".":
			b.WriteString("%2E")
		case "..":
			b.WriteString("%2E%2E")
		default:
			b.WriteString(url.PathEscape(seg))
		}
	}
	return b.String()
}
