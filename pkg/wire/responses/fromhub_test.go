package responses

import "testing"

func TestWithStore(t *testing.T) {
	cases := []struct {
		in   string
		kept bool
		want string
	}{
		{"{\"id\":\"resp_1\"}\n", false, "{\"id\":\"resp_1\",\"store\":false}\n"},
		{`{"id":"resp_1"}`, true, `{"id":"resp_1","store":true}`},
		{`{"store":true,"id":"resp_1"}`, false, `{"store":false,"id":"resp_1"}`},
		{`not json`, true, `not json`},
	}
	for _, c := range cases {
		if got := string(WithStore([]byte(c.in), c.kept)); got != c.want {
			t.Errorf("WithStore(%s, %v) = %s, want %s", c.in, c.kept, got, c.want)
		}
	}
}
