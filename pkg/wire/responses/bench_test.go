package responses_test

import (
	"testing"

	"github.com/buzzgate/buzzgate/pkg/wire/responses"
)

// BenchmarkObserveDelta is the observer's cost for the commonest event of
// a stream passed through.
func BenchmarkObserveDelta(b *testing.B) {
	data := []byte(`{"type":"response.output_text.delta","sequence_number":6,"item_id":"msg_68af4030592c81938ec0a5fbab4a3e9f05438e46b5f69a3b","output_index":1,"content_index":0,"delta":" world","logprobs":[],"obfuscation":"eOLpuv7AxKf"}`)
	var o responses.Observer
	b.ReportAllocs()
	for b.Loop() {
		if _, err := o.Observe("response.output_text.delta", data); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecodeDelta is the decoder's, translating it.
func BenchmarkDecodeDelta(b *testing.B) {
	data := []byte(`{"type":"response.output_text.delta","sequence_number":6,"item_id":"msg_68af4030592c81938ec0a5fbab4a3e9f05438e46b5f69a3b","output_index":1,"content_index":0,"delta":" world","logprobs":[],"obfuscation":"eOLpuv7AxKf"}`)
	d := responses.NewDecoder(1)
	if _, err := d.Decode("", []byte(created)); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := d.Decode("response.output_text.delta", data); err != nil {
			b.Fatal(err)
		}
	}
}
