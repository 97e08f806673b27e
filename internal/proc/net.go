package proc

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"time"
)

// FreeAddr returns a loopback address, 127.0.0.1:PORT, whose port was free
// when asked. Another process may take it before the caller binds it, so a
// caller that starts a server there retries with a new address when the
// server fails to start.
func FreeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// Accepting is a check for WaitReady: addr accepts a TCP connection.
func Accepting(addr string) func() error {
	return func() error {
		c, err := net.DialTimeout("tcp", addr, 250*time.Millisecond)
		if err != nil {
			return err
		}
		return c.Close()
	}
}

// HTTPOK is a check for WaitReady: GET url answers 200 OK.
func HTTPOK(url string) func() error {
	return func() error {
		resp, err := http.Get(url)
		if err != nil {
			return err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("GET %s: %s", url, resp.Status)
		}
		return nil
	}
}
