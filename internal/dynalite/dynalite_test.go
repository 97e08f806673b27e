//go:build integration

package dynalite_test

import (
	"net"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/buzzgate/buzzgate/internal/dynalite"
)

func TestLaunchAndClose(t *testing.T) {
	s, err := dynalite.Launch()
	if err != nil {
		t.Fatal(err)
	}
	client := dynalite.Client(t, s.Endpoint)
	if _, err := client.ListTables(t.Context(), &dynamodb.ListTablesInput{}); err != nil {
		s.Close()
		t.Fatalf("ListTables: %v (output: %s)", err, s.Output())
	}
	s.Close()
	s.Close() // twice is fine
	u, _ := url.Parse(s.Endpoint)
	if c, err := net.DialTimeout("tcp", u.Host, time.Second); err == nil {
		c.Close()
		t.Fatalf("%s still accepts connections after Close", s.Endpoint)
	}
}

func TestStart(t *testing.T) {
	endpoint := dynalite.Start(t)
	if !strings.HasPrefix(endpoint, "http://127.0.0.1:") {
		t.Fatalf("endpoint %q", endpoint)
	}
	if _, err := dynalite.Client(t, endpoint).ListTables(t.Context(), &dynamodb.ListTablesInput{}); err != nil {
		t.Fatal(err)
	}
}

func TestBinaryFromModuleRoot(t *testing.T) {
	t.Setenv(dynalite.EnvBinary, "")
	p, err := dynalite.Binary()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(p, "/.tools/dynalite/node_modules/.bin/dynalite") {
		t.Fatalf("Binary() = %s", p)
	}
}
