package clientapi

import "testing"

func TestMayRefer(t *testing.T) {
	for _, tc := range []struct {
		body string
		want bool
	}{
		{`{"messages":[{"content":"hi"}]}`, false},
		{`{"messages":[{"content":"a file_id"}]}`, false},
		{`{"messages":[{"content":"the \"file_id\" key"}]}`, false},
		{`{"messages":[{"file":{"file_id":"x"}}]}`, true},
		{`{"messages":[{"content":"caf\u00e9 \u003cb\u003e \u4e2d"}]}`, false},
		{`{"messages":[{"file":{"\u0066ile_id":"x"}}]}`, true},
		{`{"messages":[{"file":{"fil\u0065\u005Fid":"x"}}]}`, true},
		{`{"x":"\u00`, false},
		{`{"x":"\u00zz"}`, false},
	} {
		if got := MayRefer([]byte(tc.body), `"file_id"`); got != tc.want {
			t.Errorf("MayRefer(%s) = %v, want %v", tc.body, got, tc.want)
		}
	}
}
