// Command refproxy is the floor of the load benchmark: a reverse proxy
// that does nothing but forward (net/http/httputil.ReverseProxy, the
// standard library's own), run in the gateway's place by
//
//	go -C tools build -o /tmp/refproxy ./loadbench/refproxy
//	make bench-load ARGS='-gateway /tmp/refproxy -out bin/bench-load/floor -label "floor: httputil.ReverseProxy"'
//
// What it adds over calling the mock directly is what any Go HTTP hop adds
// on this machine (a second connection pair, two more reads and writes per
// request, the goroutine hand-offs of net/http's client): no gateway can go
// below it. It reads the mock's address from the config the benchmark
// writes (BUZZGATE_CONFIG, the provider's base_url) and listens on
// BUZZGATE_ADDR; it answers /healthz. It knows nothing of keys, so the
// benchmark's keyed and replay rows mean nothing for it.
package main

import (
	"fmt"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"regexp"
)

func main() {
	cfg, err := os.ReadFile(os.Getenv("BUZZGATE_CONFIG"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "refproxy:", err)
		os.Exit(1)
	}
	m := regexp.MustCompile(`base_url:\s*"?([^"\s]+)`).FindSubmatch(cfg)
	if m == nil {
		fmt.Fprintln(os.Stderr, "refproxy: no base_url in", os.Getenv("BUZZGATE_CONFIG"))
		os.Exit(1)
	}
	up, err := url.Parse(string(m[1]))
	if err != nil {
		fmt.Fprintln(os.Stderr, "refproxy:", err)
		os.Exit(1)
	}
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = 64 // as the gateway's upstream transport keeps them
	proxy := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(up)
			r.Out.URL.Path = up.Path + "/chat/completions"
		},
		Transport:     t,
		FlushInterval: -1, // streams flush each write, as the gateway does
	}
	mux := http.NewServeMux()
	mux.Handle("/api/v1/chat/completions", proxy)
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok\n")) })
	if err := http.ListenAndServe(os.Getenv("BUZZGATE_ADDR"), mux); err != nil {
		fmt.Fprintln(os.Stderr, "refproxy:", err)
		os.Exit(1)
	}
}
