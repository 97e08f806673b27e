// Command coldstart measures the gateway's Lambda cold start, as `make
// coldstart` runs it: the size of the deployed bootstrap, and its init time,
// from process start to its first GET /2018-06-01/runtime/invocation/next
// against a fake Runtime API served here, over many runs, with the memory
// store and with the DynamoDB store config. It also reports every network
// connection the bootstrap opened during init other than to the Runtime API:
// AWS_ENDPOINT_URL_DYNAMODB points at a listener that counts connections,
// and HTTP_PROXY/HTTPS_PROXY at another (so any call to an AWS service,
// IMDS or elsewhere through the SDK's HTTP client shows up there).
// With the memory store it also times the first invocation (the
// chat-completion sample event, from handing over the event to the end of
// the streamed response).
package main

import (
	"archive/zip"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/buzzgate/buzzgate/internal/proc"
)

func main() {
	bootstrap := flag.String("bootstrap", "bin/local/bootstrap", "the bootstrap built for this machine, with the deployed build's flags")
	deployed := flag.String("size", "", "the deployed (arm64) bootstrap, whose size is reported")
	event := flag.String("event", "events/chat-completion.json", "the event of the first invocation (memory store)")
	runs := flag.Int("runs", 20, "runs per config")
	flag.Func("env", "KEY=VALUE added to the bootstrap's environment (repeatable)", func(kv string) error {
		if !strings.Contains(kv, "=") {
			return fmt.Errorf("%q is not KEY=VALUE", kv)
		}
		extraEnv = append(extraEnv, kv)
		return nil
	})
	flag.Parse()
	if err := run(*bootstrap, *deployed, *event, *runs); err != nil {
		fmt.Fprintln(os.Stderr, "coldstart:", err)
		os.Exit(1)
	}
}

// extraEnv is added to the bootstrap's environment (-env).
var extraEnv []string

func run(bootstrap, deployed, eventFile string, runs int) error {
	if deployed != "" {
		if err := reportSize(deployed); err != nil {
			return err
		}
	}
	if err := reportSize(bootstrap); err != nil {
		return err
	}
	event, err := os.ReadFile(eventFile)
	if err != nil {
		return err
	}
	fmt.Printf("\ninit: process start to the first GET .../runtime/invocation/next, %d runs each (%s)\n", runs, bootstrap)
	fmt.Printf("%-9s %8s %8s %8s %8s   %s\n", "store", "median", "p90", "min", "max", "connections during init besides the Runtime API")
	var firstInvokes []time.Duration
	for _, store := range []string{"memory", "dynamodb"} {
		var inits []time.Duration
		var conns []string
		for range runs {
			m, err := measure(bootstrap, store, event)
			if err != nil {
				return fmt.Errorf("%s store: %w", store, err)
			}
			inits = append(inits, m.init)
			conns = append(conns, m.conns...)
			if m.firstInvoke > 0 {
				firstInvokes = append(firstInvokes, m.firstInvoke)
			}
		}
		seen := "none"
		if len(conns) > 0 {
			slices.Sort(conns)
			seen = strings.Join(slices.Compact(conns), ", ")
		}
		med, p90, lo, hi := stats(inits)
		fmt.Printf("%-9s %8s %8s %8s %8s   %s\n", store, ms(med), ms(p90), ms(lo), ms(hi), seen)
	}
	if len(firstInvokes) > 0 {
		med, p90, lo, hi := stats(firstInvokes)
		fmt.Printf("\nfirst invocation (memory store, %s): median %s, p90 %s, min %s, max %s\n", eventFile, ms(med), ms(p90), ms(lo), ms(hi))
	}
	return nil
}

func reportSize(path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var zipped bytes.Buffer
	zw := zip.NewWriter(&zipped)
	f, err := zw.CreateHeader(&zip.FileHeader{Name: "bootstrap", Method: zip.Deflate})
	if err != nil {
		return err
	}
	f.Write(b)
	if err := zw.Close(); err != nil {
		return err
	}
	fmt.Printf("%s: %d bytes (%.1f MiB), zipped %d bytes (%.1f MiB)\n", path, len(b), float64(len(b))/(1<<20), zipped.Len(), float64(zipped.Len())/(1<<20))
	return nil
}

type measurement struct {
	init        time.Duration
	firstInvoke time.Duration
	conns       []string // what the bootstrap connected to besides the Runtime API
}

// measure starts the bootstrap once against a fake Runtime API.
func measure(bootstrap, store string, event []byte) (measurement, error) {
	var m measurement
	dynamo, err := newRecorder("DynamoDB endpoint")
	if err != nil {
		return m, err
	}
	defer dynamo.Close()
	proxy, err := newRecorder("HTTP(S) proxy")
	if err != nil {
		return m, err
	}
	defer proxy.Close()

	invoke := store == "memory"
	firstNext := make(chan time.Time, 1)
	responded := make(chan time.Time, 1)
	var nexts atomic.Int32
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Method == http.MethodGet && r.URL.Path == "/2018-06-01/runtime/invocation/next":
			if nexts.Add(1) == 1 {
				firstNext <- time.Now()
				if invoke {
					w.Header().Set("Lambda-Runtime-Aws-Request-Id", "coldstart-1")
					w.Header().Set("Lambda-Runtime-Deadline-Ms", strconv.FormatInt(time.Now().Add(time.Minute).UnixMilli(), 10))
					w.Header().Set("Lambda-Runtime-Invoked-Function-Arn", "arn:aws:lambda:us-east-1:123456789012:function:buzzgate-api")
					w.Write(event)
					return
				}
			}
			<-r.Context().Done() // no more events: the process is killed
		case r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/response"):
			io.Copy(io.Discard, r.Body)
			responded <- time.Now()
			w.WriteHeader(http.StatusAccepted)
		default:
			body, _ := io.ReadAll(r.Body)
			fmt.Fprintf(os.Stderr, "unexpected Runtime API call %s %s: %s\n", r.Method, r.URL.Path, body)
			w.WriteHeader(http.StatusAccepted)
		}
	}))
	defer api.Close()

	env := []string{
		"AWS_LAMBDA_RUNTIME_API=" + strings.TrimPrefix(api.URL, "http://"),
		"AWS_LAMBDA_FUNCTION_NAME=buzzgate-api",
		"AWS_LAMBDA_FUNCTION_VERSION=$LATEST",
		"AWS_LAMBDA_FUNCTION_MEMORY_SIZE=1024",
		"AWS_REGION=us-east-1",
		"AWS_DEFAULT_REGION=us-east-1",
		"AWS_ACCESS_KEY_ID=AKIDCOLDSTART",
		"AWS_SECRET_ACCESS_KEY=coldstart",
		"AWS_SESSION_TOKEN=coldstart",
		"HTTP_PROXY=http://" + proxy.addr,
		"HTTPS_PROXY=http://" + proxy.addr,
	}
	if store == "dynamodb" {
		env = append(env, "BUZZGATE_STORE=dynamodb", "BUZZGATE_TABLE=buzzgate", "AWS_ENDPOINT_URL_DYNAMODB=http://"+dynamo.addr)
	}
	cmd := exec.Command(bootstrap)
	cmd.Env = append(env, extraEnv...)
	var stderr proc.SyncBuffer
	cmd.Stderr = &stderr
	start := time.Now()
	p, err := proc.Start(cmd)
	if err != nil {
		return m, err
	}
	defer p.Stop(0)

	timeout := time.After(30 * time.Second)
	select {
	case t := <-firstNext:
		m.init = t.Sub(start)
	case <-p.Exited():
		return m, fmt.Errorf("the bootstrap exited during init (%v), after connecting to %v:\n%s",
			p.Err(), append(dynamo.seen(), proxy.seen()...), stderr.String())
	case <-timeout:
		return m, fmt.Errorf("no GET .../next within 30s\n%s", stderr.String())
	}
	// Connections made during init have been accepted by now, or are about
	// to be: give the listeners a moment.
	time.Sleep(5 * time.Millisecond)
	m.conns = append(dynamo.seen(), proxy.seen()...)
	if invoke {
		next := start.Add(m.init)
		select {
		case t := <-responded:
			m.firstInvoke = t.Sub(next)
		case <-p.Exited():
			return m, fmt.Errorf("the bootstrap exited during the first invocation: %v\n%s", p.Err(), stderr.String())
		case <-timeout:
			return m, fmt.Errorf("no response within 30s\n%s", stderr.String())
		}
	}
	return m, nil
}

// recorder is a TCP listener that counts the connections it accepts (and
// closes them at once).
type recorder struct {
	what string
	addr string
	l    net.Listener
	mu   sync.Mutex
	n    int
	wg   sync.WaitGroup
}

func newRecorder(what string) (*recorder, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	r := &recorder{what: what, addr: l.Addr().String(), l: l}
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				if !errors.Is(err, net.ErrClosed) {
					fmt.Fprintln(os.Stderr, "recorder:", err)
				}
				return
			}
			r.mu.Lock()
			r.n++
			r.mu.Unlock()
			c.Close()
		}
	}()
	return r, nil
}

func (r *recorder) seen() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.n == 0 {
		return nil
	}
	return []string{r.what}
}

func (r *recorder) Close() {
	r.l.Close()
	r.wg.Wait()
}

// stats returns the median, the 90th percentile (nearest rank), the
// minimum and the maximum.
func stats(d []time.Duration) (median, p90, lo, hi time.Duration) {
	s := slices.Clone(d)
	slices.Sort(s)
	rank := func(p float64) time.Duration {
		i := int(math.Ceil(p*float64(len(s)))) - 1
		return s[max(i, 0)]
	}
	if len(s)%2 == 1 {
		median = s[len(s)/2]
	} else {
		median = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return median, rank(0.9), s[0], s[len(s)-1]
}

func ms(d time.Duration) string {
	return strconv.FormatFloat(float64(d.Microseconds())/1000, 'f', 1, 64) + "ms"
}
