package httpapi

import (
	"encoding/json"
	"net/http"
	"strings"

	"github.com/buzzgate/buzzgate/pkg/clientapi"
	"github.com/buzzgate/buzzgate/pkg/llm"
)

// premiumModes are the request fields that ask a provider for a mode it
// bills above a route's prices, by protocol, with the values that do not:
// Anthropic's inference_geo (US-only inference costs 1.1 times the global
// price) and speed (fast mode costs several times the standard price);
// OpenAI Responses' background (a background response is finished and
// billed after the gateway's answer, where the gateway cannot see its
// usage); Chat Completions' audio output (audio and modalities with
// "audio": OpenAI bills audio tokens at several times the text price, and
// a route prices text). service_tier is checked by checkServiceTier.
var premiumModes = map[llm.Proto][]struct {
	field string
	plain []string // the values billed at a route's prices, as compact JSON
}{
	llm.ProtoMessages:  {{"inference_geo", []string{`"global"`}}, {"speed", []string{`"standard"`}}},
	llm.ProtoResponses: {{"background", []string{"false"}}},
	llm.ProtoChat:      {{"audio", nil}, {"modalities", []string{`["text"]`}}},
}

// premiumBetas are the Anthropic betas (anthropic-beta header values, by
// prefix) that bill the request above a route's prices: the one-million
// token context window, whose prompts over 200,000 tokens cost twice the
// input and 1.5 times the output price.
var premiumBetas = []string{"context-1m"}

// checkPremium refuses a request that asks for a mode the provider bills
// above the route's prices (premiumModes, premiumBetas), with a 400 naming
// the field or header: a route has one set of prices, and the gateway
// bills what the provider bills.
func checkPremium(proto llm.Proto, members []llm.Member, h http.Header) error {
	for _, m := range members {
		for _, mode := range premiumModes[proto] {
			if m.Key != mode.field || string(m.Value) == "null" {
				continue
			}
			compact, err := compactJSON(m.Value)
			if err == nil && containsValue(mode.plain, compact) {
				continue
			}
			if len(mode.plain) == 0 {
				return llm.Errorf(llm.CodeInvalidRequest, mode.field, "%s is not served: the provider bills it above the route's prices; leave it out", mode.field)
			}
			return llm.Errorf(llm.CodeInvalidRequest, mode.field, "%s %s is not served: the provider bills it above the route's prices; send %s or leave it out",
				mode.field, clientapi.Sanitize(string(m.Value)), strings.Join(mode.plain, " or "))
		}
	}
	if proto != llm.ProtoMessages {
		return nil
	}
	for _, v := range h.Values("Anthropic-Beta") {
		for _, beta := range strings.Split(v, ",") {
			beta = strings.TrimSpace(beta)
			for _, prefix := range premiumBetas {
				if strings.HasPrefix(beta, prefix) {
					return llm.Errorf(llm.CodeInvalidRequest, "anthropic-beta", "the beta %s is not served: the provider bills it above the route's prices; leave it out of anthropic-beta",
						clientapi.Sanitize(beta))
				}
			}
		}
	}
	return nil
}

func compactJSON(v []byte) (string, error) {
	var x any
	if err := json.Unmarshal(v, &x); err != nil {
		return "", err
	}
	b, err := json.Marshal(x)
	return string(b), err
}

func containsValue(list []string, v string) bool {
	for _, s := range list {
		if s == v {
			return true
		}
	}
	return false
}
