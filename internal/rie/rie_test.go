package rie_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/buzzgate/buzzgate/internal/rie"
)

func TestDecode(t *testing.T) {
	nul8 := strings.Repeat("\x00", 8)
	tests := []struct {
		name    string
		raw     string
		status  int
		header  http.Header
		body    string
		wantErr string
	}{
		{
			name:   "headers and multi-value headers merge",
			raw:    `{"statusCode":201,"headers":{"X-A":"1"},"multiValueHeaders":{"Set-Cookie":["a=1","b=2"]}}` + nul8 + "body\x00with a NUL",
			status: 201,
			header: http.Header{"X-A": {"1"}, "Set-Cookie": {"a=1", "b=2"}},
			body:   "body\x00with a NUL",
		},
		{
			name:   "empty body",
			raw:    `{"statusCode":204,"headers":{},"multiValueHeaders":{}}` + nul8,
			status: 204,
			header: http.Header{},
		},
		{name: "no delimiter", raw: `{"statusCode":200}`, wantErr: "no eight-NUL delimiter"},
		{name: "no status", raw: `{"headers":{}}` + nul8, wantErr: "no statusCode"},
		{name: "unknown field", raw: `{"statusCode":200,"cookies":[]}` + nul8, wantErr: "unknown field"},
		{name: "plain JSON answer", raw: `{"statusCode":200,"body":"x"}`, wantErr: "no eight-NUL delimiter"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := rie.Decode([]byte(tt.raw))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if r.StatusCode != tt.status || string(r.Body) != tt.body {
				t.Errorf("got %d %q, want %d %q", r.StatusCode, r.Body, tt.status, tt.body)
			}
			if diff := cmp.Diff(tt.header, r.Header); diff != "" {
				t.Errorf("header (-want +got):\n%s", diff)
			}
		})
	}
}

func TestStartWithoutBootstrap(t *testing.T) {
	if _, err := rie.Start(rie.Options{Bootstrap: "/nonexistent/bootstrap"}); err == nil {
		t.Fatal("Start with a missing bootstrap succeeded")
	}
}

func TestDecodeBuffered(t *testing.T) {
	tests := []struct {
		name    string
		raw     string
		status  int
		header  http.Header
		body    string
		wantErr string
	}{
		{
			name:   "headers merge, a pair in both once",
			raw:    `{"statusCode":200,"headers":{"X-A":"1","Set-Cookie":"a=1"},"multiValueHeaders":{"Set-Cookie":["a=1","b=2"]},"body":"{\"ok\":true}"}`,
			status: 200,
			header: http.Header{"X-A": {"1"}, "Set-Cookie": {"a=1", "b=2"}},
			body:   `{"ok":true}`,
		},
		{
			name:   "null headers, base64 body",
			raw:    `{"statusCode":404,"headers":null,"multiValueHeaders":null,"body":"aGk=","isBase64Encoded":true}`,
			status: 404,
			header: http.Header{},
			body:   "hi",
		},
		{name: "the streaming format", raw: `{"statusCode":200}` + strings.Repeat("\x00", 8) + "body", wantErr: "JSON object"},
		{name: "an unknown key", raw: `{"statusCode":200,"body":"","trailer":1}`, wantErr: `key "trailer"`},
		{name: "no status is 200", raw: `{"body":"x"}`, status: 200, header: http.Header{}, body: "x"},
		{name: "a status of 0 is 200", raw: `{"statusCode":0,"body":""}`, status: 200, header: http.Header{}},
		{name: "a negative status", raw: `{"statusCode":-1,"body":""}`, wantErr: "positive"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := rie.DecodeBuffered([]byte(tt.raw))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err %v, want one mentioning %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if r.StatusCode != tt.status || string(r.Body) != tt.body {
				t.Errorf("%d %q, want %d %q", r.StatusCode, r.Body, tt.status, tt.body)
			}
			if diff := cmp.Diff(tt.header, r.Header); diff != "" {
				t.Errorf("header (-want +got):\n%s", diff)
			}
		})
	}
}
