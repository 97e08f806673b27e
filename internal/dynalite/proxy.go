package dynalite

import (
	"bytes"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// Proxy sits in front of dynalite and adds what dynalite leaves out: when a
// PutItem, UpdateItem or DeleteItem that asked for
// ReturnValuesOnConditionCheckFailure=ALL_OLD fails its condition, real
// DynamoDB puts the item as it was into the ConditionalCheckFailedException
// ("Item"); dynalite ignores the parameter. The proxy reads the item with a
// consistent GetItem right after the failure and adds it to the error body
// (with the X-Amz-Crc32 the SDK checks), so that the SDK's own deserializer
// and the caller's ALL_OLD path run as they would against DynamoDB. The
// GetItem happens after the failed write, so a concurrent writer can make the
// item differ from the one that failed the condition: fine for tests that
// do not race on the key.
type Proxy struct {
	// Endpoint is the proxy's base URL.
	Endpoint string

	target   string
	srv      *httptest.Server
	injected atomic.Int64

	mu   sync.Mutex
	keys map[string][]string // table -> key attribute names
}

// AllOldProxy starts a Proxy in front of the dynalite at endpoint for the
// test and returns the proxy's endpoint.
func AllOldProxy(tb testing.TB, endpoint string) *Proxy {
	tb.Helper()
	p := NewProxy(endpoint)
	tb.Cleanup(p.Close)
	return p
}

// NewProxy starts a Proxy in front of the dynalite at endpoint. The caller
// must Close it.
func NewProxy(endpoint string) *Proxy {
	p := &Proxy{target: strings.TrimRight(endpoint, "/"), keys: map[string][]string{}}
	p.srv = httptest.NewServer(http.HandlerFunc(p.serve))
	p.Endpoint = p.srv.URL
	return p
}

// Close stops the proxy.
func (p *Proxy) Close() { p.srv.Close() }

// Injected counts the condition failures to which the proxy added the old
// item.
func (p *Proxy) Injected() int64 { return p.injected.Load() }

func (p *Proxy) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	status, header, out, err := p.forward(r.Header, r.Header.Get("X-Amz-Target"), body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	if status == http.StatusBadRequest {
		if injected, ok := p.addOldItem(r.Header, body, out); ok {
			out = injected
			header.Set("X-Amz-Crc32", strconv.FormatUint(uint64(crc32.ChecksumIEEE(out)), 10))
			p.injected.Add(1)
		}
	}
	header.Del("Content-Length")
	for k, vs := range header {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(out)))
	w.WriteHeader(status)
	_, _ = w.Write(out)
}

// forward sends one request to dynalite with the client's headers (dynalite
// checks that a signature is there, not that it is right).
func (p *Proxy) forward(h http.Header, target string, body []byte) (int, http.Header, []byte, error) {
	req, err := http.NewRequest(http.MethodPost, p.target+"/", bytes.NewReader(body))
	if err != nil {
		return 0, nil, nil, err
	}
	for _, k := range []string{"Authorization", "X-Amz-Date", "X-Amz-Security-Token", "Content-Type", "User-Agent"} {
		if v := h.Get(k); v != "" {
			req.Header.Set(k, v)
		}
	}
	req.Header.Set("X-Amz-Target", target)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, nil, err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, nil, nil, err
	}
	return resp.StatusCode, resp.Header.Clone(), out, nil
}

func (p *Proxy) addOldItem(h http.Header, reqBody, errBody []byte) ([]byte, bool) {
	op := h.Get("X-Amz-Target")
	op = op[strings.LastIndex(op, ".")+1:]
	if op != "PutItem" && op != "UpdateItem" && op != "DeleteItem" {
		return nil, false
	}
	var errDoc map[string]json.RawMessage
	if json.Unmarshal(errBody, &errDoc) != nil {
		return nil, false
	}
	var typ string
	_ = json.Unmarshal(errDoc["__type"], &typ)
	if !strings.HasSuffix(typ, "#ConditionalCheckFailedException") {
		return nil, false
	}
	var in struct {
		TableName                           string
		Item                                map[string]json.RawMessage
		Key                                 map[string]json.RawMessage
		ReturnValuesOnConditionCheckFailure string
	}
	if json.Unmarshal(reqBody, &in) != nil || in.ReturnValuesOnConditionCheckFailure != "ALL_OLD" {
		return nil, false
	}
	key := in.Key
	if op == "PutItem" {
		names, err := p.keyNames(h, in.TableName)
		if err != nil {
			return nil, false
		}
		key = map[string]json.RawMessage{}
		for _, n := range names {
			key[n] = in.Item[n]
		}
	}
	get, _ := json.Marshal(map[string]any{"TableName": in.TableName, "Key": key, "ConsistentRead": true})
	status, _, out, err := p.forward(h, "DynamoDB_20120810.GetItem", get)
	if err != nil || status != http.StatusOK {
		return nil, false
	}
	var got struct{ Item json.RawMessage }
	if json.Unmarshal(out, &got) != nil || len(got.Item) == 0 {
		return nil, false // no item: DynamoDB sends none either
	}
	errDoc["Item"] = got.Item
	b, err := json.Marshal(errDoc)
	if err != nil {
		return nil, false
	}
	return b, true
}

func (p *Proxy) keyNames(h http.Header, table string) ([]string, error) {
	p.mu.Lock()
	names, ok := p.keys[table]
	p.mu.Unlock()
	if ok {
		return names, nil
	}
	req, _ := json.Marshal(map[string]string{"TableName": table})
	status, _, out, err := p.forward(h, "DynamoDB_20120810.DescribeTable", req)
	if err != nil {
		return nil, err
	}
	if status != http.StatusOK {
		return nil, fmt.Errorf("DescribeTable %s: %d %s", table, status, out)
	}
	var desc struct {
		Table struct {
			KeySchema []struct{ AttributeName string }
		}
	}
	if err := json.Unmarshal(out, &desc); err != nil {
		return nil, err
	}
	for _, k := range desc.Table.KeySchema {
		names = append(names, k.AttributeName)
	}
	p.mu.Lock()
	p.keys[table] = names
	p.mu.Unlock()
	return names, nil
}
