package responses

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/buzzgate/buzzgate/pkg/llm"
	"github.com/buzzgate/buzzgate/pkg/router"
	responseswire "github.com/buzzgate/buzzgate/pkg/wire/responses"
)

// TestDecodeResponsesGatewayObjects checks that the gateway-owned objects
// reach llm.DecodeChatRequest as they were.
func TestDecodeResponsesGatewayObjects(t *testing.T) {
	in := `{"model":"m:nitro","input":"q","gateway":{"retry":{"max_attempts_per_route":2},"routing":{"allow_fallbacks":false}},
		"provider":{"only":["x"],"data_collection":"deny"}}`
	r, err := responseswire.ToHub([]byte(in), nil)
	if err != nil {
		t.Fatal(err)
	}
	req, err := llm.DecodeChatRequest(r.Chat)
	if err != nil {
		t.Fatal(err)
	}
	if req.Model != "m" || req.Suffix != ":nitro" || req.Gateway.MaxAttemptsPerRoute != 2 || router.TargetOf(req).AllowFallbacks() ||
		!cmp.Equal(req.Provider.Only, []string{"x"}) || req.Provider.DataCollection != "deny" {
		t.Errorf("decoded %+v", req)
	}
	r, err = responseswire.ToHub([]byte(`{"model":"m","input":"q","gateway":{"retry":{"max_total_attempts":99}}}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = llm.DecodeChatRequest(r.Chat)
	var e *llm.Error
	if !errors.As(err, &e) || e.Param != "gateway.retry.max_total_attempts" {
		t.Errorf("DecodeChatRequest: %v, want param gateway.retry.max_total_attempts", err)
	}
}
