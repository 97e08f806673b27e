// Command mockupstream is the loopback OpenAI-compatible upstream of the load
// benchmark (tools/loadbench). POST /v1/chat/completions answers at once
// with a fixed chat.completion of exactly 448 bytes (with usage); with
// "stream": true it answers the same text as Chat Completions SSE chunks (a
// role chunk, one chunk per word, a finish chunk, a usage chunk when
// stream_options.include_usage is true, then data: [DONE]), as OpenAI does.
// Every answer is built once at start-up, so the mock costs little CPU of
// its own. It prints "listening <addr>" on stdout once it accepts
// connections.
package main

import (
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "listen address (loopback)")
	flushEach := flag.Bool("flush-each", false, "flush after every SSE event instead of once after the last")
	chunkWords := flag.Int("chunk-words", 0, "words of text per streamed chunk (0: the whole text in one chunk)")
	flag.Parse()
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "mockupstream:", err)
		os.Exit(1)
	}
	fmt.Printf("listening %s\n", ln.Addr())
	srv := &http.Server{Handler: newHandler(*flushEach, *chunkWords)}
	if err := srv.Serve(ln); err != nil {
		fmt.Fprintln(os.Stderr, "mockupstream:", err)
		os.Exit(1)
	}
}
