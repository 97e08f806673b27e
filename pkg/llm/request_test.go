package llm

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/google/go-cmp/cmp"
)

const minimal = `{"model":"demo/chat","messages":[{"role":"user","content":"hi"}]}`

func TestDecodeChatRequestValid(t *testing.T) {
	f, tr := false, true
	tests := []struct {
		name string
		body string
		want ChatRequest
	}{
		{"minimal", minimal, ChatRequest{Model: "demo/chat"}},
		{"floor suffix", `{"model":"demo/chat:floor","messages":[{"role":"user","content":"hi"}]}`,
			ChatRequest{Model: "demo/chat", Suffix: ":floor"}},
		{"nitro suffix and stream with usage", `{"model":"m:nitro","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user"}]}`,
			ChatRequest{Model: "m", Suffix: ":nitro", Stream: true, IncludeUsage: true}},
		{"nulls are absent", `{"model":"m","stream":null,"stream_options":null,"gateway":null,"provider":null,"messages":[{"role":"user"}]}`,
			ChatRequest{Model: "m"}},
		{"gateway object", `{"model":"m","messages":[{"role":"user"}],"gateway":{"retry":{"max_attempts_per_route":3,"max_total_attempts":5,"backoff":250},"routing":{"allow_fallbacks":false}}}`,
			ChatRequest{Model: "m", Gateway: GatewayOptions{MaxAttemptsPerRoute: 3, MaxTotalAttempts: 5, Backoff: 250 * time.Millisecond, BackoffSet: true, AllowFallbacks: &f}}},
		{"backoff as duration string", `{"model":"m","messages":[{"role":"user"}],"gateway":{"retry":{"backoff":"2s"}}}`,
			ChatRequest{Model: "m", Gateway: GatewayOptions{Backoff: 2 * time.Second, BackoffSet: true}}},
		{"provider object", `{"model":"m","messages":[{"role":"user"}],"provider":{"order":["b","a"],"only":["a","b"],"ignore":["c"],"allow_fallbacks":true,"zdr":true,"data_collection":"deny","sort":"latency"}}`,
			ChatRequest{Model: "m", Provider: ProviderPreferences{Order: []string{"b", "a"}, Only: []string{"a", "b"}, Ignore: []string{"c"}, AllowFallbacks: &tr, ZDR: true, DataCollection: "deny", Sort: SortLatency}}},
		{"unknown fields pass", `{"model":"m","messages":[{"role":"user"}],"temperature":0.2,"tools":[{"type":"function"}],"anything":{"x":1}}`,
			ChatRequest{Model: "m"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := DecodeChatRequest([]byte(tt.body))
			if err != nil {
				t.Fatalf("DecodeChatRequest: %v", err)
			}
			if diff := cmp.Diff(tt.want, *got, cmp.AllowUnexported(ChatRequest{}), cmp.FilterPath(func(p cmp.Path) bool {
				n := p.Last().String()
				return n == ".fields" || n == ".size" || n == ".noObjectKey"
			}, cmp.Ignore())); diff != "" {
				t.Errorf("request (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDecodeChatRequestInvalid(t *testing.T) {
	tests := []struct {
		name, body, param, msg string
	}{
		{"empty body", ``, "", "not valid JSON"},
		{"not json", `hello`, "", "must be a JSON object"},
		{"array", `[1,2]`, "", "must be a JSON object"},
		{"null", `null`, "", "must be a JSON object"},
		{"truncated", `{"model":"m"`, "", "not valid JSON"},
		{"trailing garbage", minimal + `x`, "", "not valid JSON"},
		{"missing model", `{"messages":[{"role":"user"}]}`, "model", "required"},
		{"model wrong type", `{"model":5,"messages":[{"role":"user"}]}`, "model", "must be a string"},
		{"empty model", `{"model":"","messages":[{"role":"user"}]}`, "model", "must not be empty"},
		{"huge model", `{"model":"` + strings.Repeat("m", 300) + `","messages":[{"role":"user"}]}`, "model", "longer"},
		{"missing messages", `{"model":"m"}`, "messages", "required"},
		{"messages not array", `{"model":"m","messages":{}}`, "messages", "must be an array"},
		{"messages empty", `{"model":"m","messages":[]}`, "messages", "must not be empty"},
		{"message not object", `{"model":"m","messages":["hi"]}`, "messages[0]", "must be an object"},
		{"message without role", `{"model":"m","messages":[{"role":"user"},{"content":"x"}]}`, "messages[1].role", "role"},
		{"stream wrong type", `{"model":"m","messages":[{"role":"user"}],"stream":"yes"}`, "stream", "boolean"},
		{"stream_options wrong type", `{"model":"m","messages":[{"role":"user"}],"stream_options":true}`, "stream_options", "object"},
		{"include_usage wrong type", `{"model":"m","messages":[{"role":"user"}],"stream_options":{"include_usage":1}}`, "stream_options.include_usage", "boolean"},
		{"gateway not object", `{"model":"m","messages":[{"role":"user"}],"gateway":[]}`, "gateway", "object"},
		{"gateway unknown field", `{"model":"m","messages":[{"role":"user"}],"gateway":{"retries":1}}`, "gateway.retries", "unknown field"},
		{"per route too high", `{"model":"m","messages":[{"role":"user"}],"gateway":{"retry":{"max_attempts_per_route":5}}}`, "gateway.retry.max_attempts_per_route", "1 to 4"},
		{"per route zero", `{"model":"m","messages":[{"role":"user"}],"gateway":{"retry":{"max_attempts_per_route":0}}}`, "gateway.retry.max_attempts_per_route", "1 to 4"},
		{"total too high", `{"model":"m","messages":[{"role":"user"}],"gateway":{"retry":{"max_total_attempts":9}}}`, "gateway.retry.max_total_attempts", "1 to 8"},
		{"total fraction", `{"model":"m","messages":[{"role":"user"}],"gateway":{"retry":{"max_total_attempts":2.5}}}`, "gateway.retry.max_total_attempts", "integer"},
		{"total string", `{"model":"m","messages":[{"role":"user"}],"gateway":{"retry":{"max_total_attempts":"2"}}}`, "gateway.retry.max_total_attempts", "integer"},
		{"backoff negative", `{"model":"m","messages":[{"role":"user"}],"gateway":{"retry":{"backoff":-1}}}`, "gateway.retry.backoff", "0 to 60000"},
		{"backoff too long", `{"model":"m","messages":[{"role":"user"}],"gateway":{"retry":{"backoff":"2m"}}}`, "gateway.retry.backoff", "0 to 60"},
		{"backoff garbage", `{"model":"m","messages":[{"role":"user"}],"gateway":{"retry":{"backoff":"soon"}}}`, "gateway.retry.backoff", "duration"},
		{"routing unknown", `{"model":"m","messages":[{"role":"user"}],"gateway":{"routing":{"sort":"price"}}}`, "gateway.routing.sort", "unknown field"},
		{"allow_fallbacks wrong type", `{"model":"m","messages":[{"role":"user"}],"gateway":{"routing":{"allow_fallbacks":"no"}}}`, "gateway.routing.allow_fallbacks", "boolean"},
		{"provider not object", `{"model":"m","messages":[{"role":"user"}],"provider":"a"}`, "provider", "object"},
		{"provider unknown field", `{"model":"m","messages":[{"role":"user"}],"provider":{"quantizations":["fp8"]}}`, "provider.quantizations", "unknown field"},
		{"order not array", `{"model":"m","messages":[{"role":"user"}],"provider":{"order":"a"}}`, "provider.order", "array"},
		{"order element", `{"model":"m","messages":[{"role":"user"}],"provider":{"order":["a",3]}}`, "provider.order[1]", "provider name"},
		{"zdr wrong type", `{"model":"m","messages":[{"role":"user"}],"provider":{"zdr":"true"}}`, "provider.zdr", "boolean"},
		{"data_collection bad", `{"model":"m","messages":[{"role":"user"}],"provider":{"data_collection":"never"}}`, "provider.data_collection", "allow"},
		{"sort bad", `{"model":"m","messages":[{"role":"user"}],"provider":{"sort":"random"}}`, "provider.sort", "price"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := DecodeChatRequest([]byte(tt.body))
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("err = %v, want *Error", err)
			}
			if e.Code != CodeInvalidRequest || e.Param != tt.param || !strings.Contains(e.Message, tt.msg) {
				t.Errorf("got code %q param %q message %q; want invalid_request param %q message containing %q", e.Code, e.Param, e.Message, tt.param, tt.msg)
			}
		})
	}
}

func TestUpstreamBody(t *testing.T) {
	req, err := DecodeChatRequest([]byte(`{"model":"demo/chat:floor","messages":[{"role":"user","content":"hi"}],"temperature":0.5,"stream":false,
		"stream_options":{"include_usage":false,"extra":1},"gateway":{"retry":{"max_total_attempts":2}},"provider":{"zdr":true}}`))
	if err != nil {
		t.Fatal(err)
	}
	body, err := req.UpstreamBody("up-model")
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"model":          "up-model",
		"messages":       []any{map[string]any{"role": "user", "content": "hi"}},
		"temperature":    0.5,
		"stream":         true,
		"stream_options": map[string]any{"include_usage": true, "extra": 1.0},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("upstream body (-want +got):\n%s", diff)
	}
}

// TestUpstreamPartsShareLargeValues: a large value goes upstream from the
// client's body, not from a copy, and the pieces make UpstreamBody.
func TestUpstreamPartsShareLargeValues(t *testing.T) {
	text := strings.Repeat("y", 2*partMin)
	body := []byte(`{"model":"m","messages":[{"role":"user","content":"` + text + `"}],"temperature":0.5}`)
	req, err := DecodeChatRequest(body)
	if err != nil {
		t.Fatal(err)
	}
	parts, err := req.UpstreamParts("up")
	if err != nil {
		t.Fatal(err)
	}
	joined, _ := req.UpstreamBody("up")
	if !bytes.Equal(bytes.Join(parts, nil), joined) {
		t.Fatalf("parts joined %q, UpstreamBody %q", bytes.Join(parts, nil), joined)
	}
	i := bytes.Index(body, []byte(`[{"role"`))
	found := false
	for _, p := range parts {
		if len(p) > partMin && unsafe.SliceData(p) == &body[i] {
			found = true
		}
	}
	if !found {
		t.Errorf("messages were copied: no piece is the body's own %d bytes", len(body)-i-20)
	}
	if want := `{"model":"up","stream":true,"stream_options":{"include_usage":true},"messages":`; !bytes.HasPrefix(joined, []byte(want)) {
		t.Errorf("body starts %.80s", joined)
	}
}

func TestDemand(t *testing.T) {
	tests := []struct {
		body    string
		project DataDemand
		want    DataDemand
	}{
		{minimal, DemandNone, DemandNone},
		{minimal, DemandZDR, DemandZDR},
		{`{"model":"m","messages":[{"role":"user"}],"provider":{"zdr":true}}`, DemandNone, DemandZDR},
		{`{"model":"m","messages":[{"role":"user"}],"provider":{"data_collection":"deny"}}`, DemandZDR, DemandDeny},
		{`{"model":"m","messages":[{"role":"user"}],"provider":{"zdr":true}}`, DemandDeny, DemandDeny},
		{`{"model":"m","messages":[{"role":"user"}],"provider":{"data_collection":"allow"}}`, DemandNone, DemandNone},
	}
	for _, tt := range tests {
		req, err := DecodeChatRequest([]byte(tt.body))
		if err != nil {
			t.Fatal(err)
		}
		if got := req.Demand(tt.project); got != tt.want {
			t.Errorf("Demand(%s) for %s = %s, want %s", tt.project, tt.body, got, tt.want)
		}
	}
}

// FuzzDecodeChatRequest: any body is either a request or an invalid_request
// error, never a panic or another kind of error; a request always produces
// an upstream body that is valid JSON.
func FuzzDecodeChatRequest(f *testing.F) {
	for _, s := range []string{minimal, ``, `{}`, `[]`, `{"model":"m:floor","messages":[{"role":"user"}],"gateway":{"retry":{"backoff":"1s"}}}`,
		`{"model":"m","messages":[{"role":"user"}],"provider":{"order":["a"],"sort":"price"},"stream":true,"stream_options":{"include_usage":true}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := DecodeChatRequest(body)
		if err != nil {
			var e *Error
			if !errors.As(err, &e) || e.Code != CodeInvalidRequest {
				t.Fatalf("error %v is not an invalid_request *Error", err)
			}
			return
		}
		const model = "x<&>\u2028\"\\\xff"
		out, err := req.UpstreamBody(model)
		if err != nil {
			t.Fatalf("UpstreamBody: %v", err)
		}
		if !json.Valid(out) {
			t.Fatalf("upstream body is not JSON: %q", out)
		}
		// Every field but the gateway's own goes through, under its own
		// name, with the model and streaming set.
		var got map[string]json.RawMessage
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatal(err)
		}
		var m string
		if err := json.Unmarshal(got["model"], &m); err != nil || m != strings.ToValidUTF8(model, "\uFFFD") || string(got["stream"]) != "true" {
			t.Fatalf("model %s stream %s in %q", got["model"], got["stream"], out)
		}
		for k := range req.fields {
			switch k {
			case "gateway", "provider":
				if _, ok := got[k]; ok {
					t.Fatalf("%q went upstream: %q", k, out)
				}
			default:
				if _, ok := got[k]; !ok {
					t.Fatalf("%q is missing upstream: %q", k, out)
				}
			}
		}
	})
}

var splitSeeds = []string{
	minimal, ``, `{}`, ` { } `, `[]`, `null`, `{"a":1,"a":2}`, `{"a":1}x`, `{"a":1,}`, `{"\u0061":1}`, "{\"\xff\":1}",
	`{"model":"m","messages":[{"role":"user","content":"hi \ud83d\ude00"}],"n":1e3,"x":[null,true,false,{"y":-0.5}]}`,
	`{"model":"m","messages":[{"Role":"user"}]}`, `{"model":"m","messages":[{"role":"user","role":""}]}`,
	`{"model":"m","messages":[{"role":""}]}`, `{"model":"m","messages":[null]}`, `{"model":"m","messages":[]}`,
	`{"model":"m","messages":[{"role":"a"},{"role":null}]}`, `{"model":"m","messages":[{"role":"\u0000"}]}`,
	`{"model":"m\u00e9","messages":[{"role":"user"}]}`, `{"model":"m","messages":[{"role":"user"}] , "s": "\t"}`,
}

// FuzzSplitObject: whenever the fast path splits a body, encoding/json
// decodes it to the same fields, and every value is capped (an append to
// one cannot overwrite the body).
func FuzzSplitObject(f *testing.F) {
	for _, s := range splitSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		got, ok := splitObject(body)
		if !ok {
			return
		}
		var want map[string]json.RawMessage
		if err := json.Unmarshal(body, &want); err != nil {
			t.Fatalf("split %q, which encoding/json refuses: %v", body, err)
		}
		if len(got) != len(want) {
			t.Fatalf("%q: %d fields, encoding/json %d", body, len(got), len(want))
		}
		for k, v := range want {
			if !bytes.Equal(got[k], v) {
				t.Fatalf("%q: field %q is %q, encoding/json %q", body, k, got[k], v)
			}
			if cap(got[k]) != len(got[k]) {
				t.Fatalf("%q: field %q is not capped", body, k)
			}
		}
	})
}

// FuzzMessagesOK: the fast path never passes messages that the checks
// through encoding/json refuse.
func FuzzMessagesOK(f *testing.F) {
	for _, s := range splitSeeds {
		var m map[string]json.RawMessage
		if json.Unmarshal([]byte(s), &m) == nil && m["messages"] != nil {
			f.Add([]byte(m["messages"]))
		}
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		if len(raw) == 0 || !messagesOK(raw) {
			return
		}
		if err := checkMessagesJSON(raw); err != nil {
			t.Fatalf("fast path passed %q; encoding/json: %v", raw, err)
		}
	})
}

// The fast paths are taken for the requests clients send, and refuse what
// they must leave to encoding/json.
func TestFastPathsTaken(t *testing.T) {
	for _, c := range []struct {
		body      string
		split, ok bool
	}{
		{minimal, true, true},
		{`{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}],"max_tokens":5}`, true, true},
		{`{"model":"m","messages":[{"Role":"user"}]}`, true, false},
		{`{"model":"m","messages":[{"role":"user","role":"x"}]}`, true, false},
		{`{"model":"m","messages":[]}`, true, false},
		{`{"\u006dodel":"m","messages":[{"role":"user"}]}`, false, true},
		{`{"model":"m","model":"n","messages":[{"role":"user"}]}`, true, true},
		{`{"model":"m"} x`, false, false},
	} {
		fields, split := splitObject([]byte(c.body))
		if split != c.split {
			t.Errorf("%s: split %v, want %v", c.body, split, c.split)
		}
		var m map[string]json.RawMessage
		if json.Unmarshal([]byte(c.body), &m) == nil {
			if ok := messagesOK(m["messages"]); ok != c.ok {
				t.Errorf("%s: messagesOK %v, want %v", c.body, ok, c.ok)
			}
		}
		if split && string(fields["model"]) != string(m["model"]) {
			t.Errorf("%s: model %s, want %s", c.body, fields["model"], m["model"])
		}
	}
}

// splitObject is json.Unmarshal(body, &fields) for a map of
// json.RawMessage, without reflection and without copying the values: they
// are slices of body. It returns false, and encoding/json decides (errors
// included), whenever it cannot be sure of the same result: a body that is
// not one object, a key with an escape or invalid UTF-8 (encoding/json
// decodes or replaces them), nesting deeper than maxScanDepth, anything
// malformed. A key given twice keeps its last value, as encoding/json's
// map decoding does. FuzzSplitObject checks the two against each other: a test's view of splitChat.
func splitObject(body []byte) (map[string]json.RawMessage, bool) {
	fields, _, ok := splitChat(body, false)
	return fields, ok
}
