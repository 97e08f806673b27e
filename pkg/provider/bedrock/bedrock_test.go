package bedrock

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
)

// closingBody fails every read once it is closed, as the SDK's request
// body does.
type closingBody struct {
	r      io.Reader
	closed bool
}

func (b *closingBody) Read(p []byte) (int, error) {
	if b.closed {
		return 0, errors.New("read on a closed body")
	}
	return b.r.Read(p)
}

func (b *closingBody) Close() error { b.closed = true; return nil }

type recordClient struct{ req *http.Request }

func (c *recordClient) Do(req *http.Request) (*http.Response, error) {
	c.req = req
	return &http.Response{StatusCode: 200, Body: http.NoBody}, nil
}

// TestOwnBody: the transport reads a body of its own, whole, even after the
// SDK closed the one it made (net/http reads a body again for its end after
// the answer's head may have arrived; a failed read closes the connection
// that carries the answer).
func TestOwnBody(t *testing.T) {
	sdkBody := &closingBody{r: strings.NewReader(`{"messages":[]}`)}
	req, _ := http.NewRequest(http.MethodPost, "http://bedrock.test/model/m/converse-stream", sdkBody)
	var next recordClient
	if _, err := (ownBody{&next}).Do(req); err != nil {
		t.Fatal(err)
	}
	sdkBody.Close() // the SDK, once the head arrived
	got, err := io.ReadAll(next.req.Body)
	if err != nil || string(got) != `{"messages":[]}` {
		t.Errorf("the transport read %q, %v", got, err)
	}
	again, _ := next.req.GetBody()
	if b, _ := io.ReadAll(again); string(b) != `{"messages":[]}` {
		t.Errorf("GetBody gave %q", b)
	}
}
