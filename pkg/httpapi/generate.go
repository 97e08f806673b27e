package httpapi

import (
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"slices"
	"strings"

	"github.com/buzzgate/buzzgate/pkg/canonjson"
	"github.com/buzzgate/buzzgate/pkg/clientapi"
	"github.com/buzzgate/buzzgate/pkg/gateway"
	"github.com/buzzgate/buzzgate/pkg/idempotency"
	"github.com/buzzgate/buzzgate/pkg/llm"
	"github.com/buzzgate/buzzgate/pkg/router"
)

// HeaderIdempotencyKey is the header that makes a request exactly-once.
const HeaderIdempotencyKey = "Idempotency-Key"

// generate serves a generation endpoint, in one direction: authenticate,
// read the body (whole, within server.body_timeout), admit, decode and
// validate the body, plan, then run (gateway.Service.Run: the idempotency
// lookup, then what the body refers to, a Responses previous_response_id's
// kept turn, gateway.Request.Resolve, then balance and limits, then
// routing). The order of checks is the contract. Nothing of the body is
// decoded before admission: what that costs is bounded by max_in_flight.
// Whatever is refused before the lookup stores nothing, and a refusal
// after it releases the key, so a retry with the same key runs normally.
func (s *Server) generate(w *clientapi.Recorder, r *http.Request, id string, log *gateway.Log, api clientapi.API) {
	spec := api.Spec()
	fail := func(err error) { api.WriteError(w, err) }
	log.Metrics.ClientAPI = spec.Proto.String()
	p, err := s.authenticate(r)
	if err != nil {
		fail(err)
		return
	}
	log.Add(slog.String("project", p.Project.ID), slog.String("key_id", p.keyID))
	log.Metrics.Project = p.Project.ID
	body, err := s.readBody(w, r)
	if err != nil {
		fail(err)
		return
	}
	gen := &generation{}
	wire := &gen.wire
	wire.Init(w, s.cfg.Server.WriteTimeout.D(), api)
	wire.SetKeepAlive(s.keepAlive)
	slot, err := s.svc.Admit(&p.Caller)
	if err != nil {
		wire.Error(err)
		return
	}
	defer slot.Release()
	g := &gen.req
	*g = gateway.Request{ID: id, Caller: &p.Caller, Log: log, Scope: spec.Scope}
	codec, err := s.validate(r, p, g, api, body)
	if err != nil {
		wire.Error(err)
		return
	}
	s.svc.Run(r.Context(), g, &slot, wire, codec)
}

// generation is what generate allocates for a request, in one piece: the
// request the gateway runs and the writer of its answer.
type generation struct {
	req  gateway.Request
	wire clientapi.Wire
}

// passNative is the request in its own protocol for a plan that has a
// route speaking it: the translation to Chat Completions waits until a
// route of another protocol needs it (clientapi.Native, which is also the
// request's codec), so a request that passes through never pays for it,
// and one that falls back to another protocol is translated once.
func passNative(r *http.Request, g *gateway.Request, api clientapi.API, caller clientapi.Caller, body []byte, members []llm.Member, routing *llm.ChatRequest, plan *router.Plan, demand llm.DataDemand, keyed bool) gateway.Codec {
	spec := api.Spec()
	routing.Native = nativeOf(spec, r.Header, members, len(body))
	n := clientapi.NewNative(api, caller, g.ID, body, presentHints(members, spec.Hints), routing, keyed)
	field := func(name string) (json.RawMessage, bool) {
		for _, m := range members {
			if m.Key == name {
				return m.Value, true
			}
		}
		return nil, false
	}
	g.MaxOutputTokens, g.Choices = maxOutputTokens(field), choices(field)
	g.Log.Add(slog.String("model", routing.Model+routing.Suffix), slog.Bool("stream", routing.Stream))
	g.Model, g.Plan, g.Chat, g.Demand, g.IncludeUsage = routing.Model, plan, routing, demand, routing.IncludeUsage
	return n
}

// idempotencyKey checks the Idempotency-Key header and sets the request's
// key; keyed reports whether it has one. The key's fingerprint is set by
// validate.
func idempotencyKey(r *http.Request, g *gateway.Request) (keyed bool, err error) {
	keys := r.Header.Values(HeaderIdempotencyKey)
	if len(keys) == 0 {
		return false, nil
	}
	if !validKey(keys) {
		return false, llm.Errorf(llm.CodeInvalidRequest, HeaderIdempotencyKey, "send one Idempotency-Key header, a non-empty string of at most %d bytes", idempotency.MaxKeyLength)
	}
	g.IdempotencyKey = keys[0]
	return true, nil
}

func validKey(keys []string) bool {
	return len(keys) == 1 && keys[0] != "" && len(keys[0]) <= idempotency.MaxKeyLength
}

// concurrentFingerprint is the body size from which a keyed request's
// body is decoded and planned on a goroutine of its own while its
// fingerprint is computed: for a large body each takes about a millisecond
// a megabyte, and a second CPU does the two at once. The fingerprint, the
// longer of the two, keeps the request's goroutine, so that neither its
// start nor its end waits for a goroutine to be woken (0.1 to 0.3 ms each
// on a virtual machine whose other CPU is idle).
const concurrentFingerprint = 64 << 10

// validate decodes and validates the body of an admitted request, plans
// it, and fills in g, its Idempotency-Key's fingerprint included; it
// returns the request's codec. The fingerprint covers the client's own
// body, as it sent it.
func (s *Server) validate(r *http.Request, p *principal, g *gateway.Request, api clientapi.API, body []byte) (gateway.Codec, error) {
	keys := r.Header.Values(HeaderIdempotencyKey)
	if !validKey(keys) || len(body) < concurrentFingerprint {
		c, err := s.validateBody(r, p, g, api, body)
		if err != nil || g.IdempotencyKey == "" {
			return c, err
		}
		sum, fpErr := idempotency.Fingerprint(r.Method, r.URL.Path, body)
		return c, setFingerprint(g, body, sum, fpErr)
	}
	var c gateway.Codec
	var err error
	var panicked any
	done := make(chan struct{})
	go func() {
		defer close(done)
		// A panic goes on in the request's goroutine, whose recovery
		// answers 500, rather than ending the process here.
		defer func() { panicked = recover() }()
		c, err = s.validateBody(r, p, g, api, body)
	}()
	sum, fpErr := idempotency.Fingerprint(r.Method, r.URL.Path, body)
	<-done
	if panicked != nil {
		panic(panicked)
	}
	if err != nil {
		return nil, err
	}
	return c, setFingerprint(g, body, sum, fpErr)
}

// setFingerprint sets a keyed request's fingerprint, or refuses the
// request when its body has none (err, the fingerprint's error): a body
// with a member name given twice gets the error every request does
// (llm.CheckUnique, run only then).
func setFingerprint(g *gateway.Request, body []byte, sum string, err error) error {
	if err != nil {
		var ce *canonjson.Error
		if errors.As(err, &ce) && strings.HasPrefix(ce.Msg, canonjson.DuplicateName) {
			if dup := llm.CheckUnique(body); dup != nil {
				return dup
			}
		}
		return llm.Errorf(llm.CodeInvalidRequest, "", "a request with an Idempotency-Key needs an unambiguous JSON body: %v", err)
	}
	g.Fingerprint = sum
	return nil
}

// validateBody is validate but for the fingerprint: it sets the request's
// Idempotency-Key (for a valid header), not its fingerprint. A body of
// another protocol than Chat Completions is split into its members and
// checked, then planned from what routing reads of them and passed
// through when a route of its plan speaks it; any other request is
// translated to Chat Completions (a Chat Completions body is its own),
// decoded, checked, planned, and served in its client's API.
func (s *Server) validateBody(r *http.Request, p *principal, g *gateway.Request, api clientapi.API, body []byte) (gateway.Codec, error) {
	spec := api.Spec()
	caller := clientapi.Caller{Project: p.Project.ID}
	g.RateHeaders = spec.RateHeaders
	fingerprinted := validKey(r.Header.Values(HeaderIdempotencyKey))
	members, tools, split, err := splitMembers(spec, r.Header, body, fingerprinted)
	if err != nil {
		return nil, err
	}
	var ref *clientapi.ObjectRef
	if spec.Proto != llm.ProtoChat {
		ref = objectRef(api, body)
	}
	native := split && len(presentHints(members, spec.NotNative)) == 0
	var (
		plan   *router.Plan
		demand llm.DataDemand
	)
	if split {
		var routing *llm.ChatRequest
		if routing, plan, demand, err = s.planMembers(p, members, len(body), ref); err != nil {
			return nil, err
		}
		if plan != nil && native {
			if err := plan.PriceTools(spec.Proto, tools); err != nil {
				return nil, err
			}
			if plan.Speaks(spec.Proto) {
				keyed, err := idempotencyKey(r, g)
				if err != nil {
					return nil, err
				}
				return passNative(r, g, api, caller, body, members, routing, plan, demand, keyed), nil
			}
		}
	}
	// passNative took every request a route of its own protocol could
	// serve untranslated: this one has none, so the translation's error
	// is the answer.
	req, t, err := translate(api, caller, g.ID, body, fingerprinted, split && !fingerprinted)
	if err != nil {
		return nil, err
	}
	if spec.Proto == llm.ProtoChat {
		if tools, err = checkChat(spec, r.Header, req); err != nil {
			return nil, err
		}
		// The decoder read every member name: a body with none that
		// can name a provider object is not searched again.
		if req.MayNameObject() {
			ref = objectRef(api, body)
		}
	}
	g.Log.Add(slog.String("model", req.Model+req.Suffix), slog.Bool("stream", req.Stream))
	if plan == nil {
		// A Chat Completions request, or one whose own members could not
		// be planned: planned from its translation, which names the
		// problem.
		if plan, demand, err = s.plan(p, req); err != nil {
			return nil, err
		}
		if err := scopeObjects(ref, plan); err != nil {
			return nil, err
		}
	}
	if err := plan.PriceTools(spec.Proto, tools); err != nil {
		return nil, err
	}
	if native {
		req.Dropped = presentHints(members, spec.Hints)
		if plan.Speaks(spec.Proto) {
			req.Native = nativeOf(spec, r.Header, members, len(body))
		}
	}
	g.Model, g.Plan, g.Chat, g.Demand, g.IncludeUsage = req.Model, plan, req, demand, req.IncludeUsage
	g.MaxOutputTokens, g.Choices = maxOutputTokens(req.Field), choices(req.Field)
	keyed, err := idempotencyKey(r, g)
	if err != nil {
		return nil, err
	}
	if t == nil {
		return api.Codec(caller, g.ID, body, req, keyed), nil
	}
	g.Resolve = t.Resolver()
	return t.Codec(g.ID, req, keyed), nil
}

// splitMembers splits a body of another protocol than Chat Completions
// into its top-level members and checks them: the fields the gateway owns
// (spec.Owned), service_tier, the modes billed above a route's prices, and
// the billable server tools it declares, which it returns. split is false
// for a Chat Completions body, which its decoder splits (checkChat), and
// for a body the scan does not split, which its translation refuses. Either
// scan refuses a member name given twice in an object (a keyed request's
// fingerprint does, setFingerprint): the gateway and the provider could
// read different copies.
func splitMembers(spec *clientapi.Spec, h http.Header, body []byte, fingerprinted bool) (members []llm.Member, tools []llm.ServerTool, split bool, err error) {
	if spec.Proto == llm.ProtoChat {
		return nil, nil, false, nil
	}
	scan := llm.RequestMembers
	if fingerprinted {
		scan = llm.Members
	}
	members, err = scan(body)
	if dup, ok := err.(*llm.Error); ok {
		return nil, nil, false, dup
	}
	if err != nil {
		return nil, nil, false, nil
	}
	if name, bad := llm.CaseVariant(members, spec.Owned...); bad {
		return nil, nil, false, caseVariant(spec, name)
	}
	for _, m := range members {
		if m.Key == "service_tier" {
			if err := checkServiceTier(spec.Proto, m.Value); err != nil {
				return nil, nil, false, err
			}
		}
	}
	if err := checkPremium(spec.Proto, members, h); err != nil {
		return nil, nil, false, err
	}
	if tools, err = llm.ServerTools(spec.Proto, members); err != nil {
		return nil, nil, false, err
	}
	return members, tools, true, nil
}

// planMembers plans a body of another protocol from what routing reads of
// its own members (llm.NewRoutingRequest), once. A target or plan that
// fails leaves plan nil, for the translation, whose error comes first; a
// plan is kept from the providers that may not see an object the body
// refers to (ref, scopeObjects), whose refusal is err.
func (s *Server) planMembers(p *principal, members []llm.Member, size int, ref *clientapi.ObjectRef) (routing *llm.ChatRequest, plan *router.Plan, demand llm.DataDemand, err error) {
	routing, err = llm.NewRoutingRequest(members, size)
	if err != nil {
		return nil, nil, 0, nil
	}
	plan, demand, err = s.plan(p, routing)
	if err != nil {
		return routing, nil, demand, nil
	}
	// Before the translation, which refuses some of these by their
	// part's type: every API names the reference alike.
	if err := scopeObjects(ref, plan); err != nil {
		return nil, nil, 0, err
	}
	return routing, plan, demand, nil
}

// plan plans req under the caller's data policy and residency, and
// returns the data demand the plan was made for.
func (s *Server) plan(p *principal, req *llm.ChatRequest) (*router.Plan, llm.DataDemand, error) {
	d := req.Demand(p.Policy)
	plan, err := s.router.Plan(router.TargetOf(req), router.Policy{Demand: d, Residency: p.Project.Residency})
	return plan, d, err
}

// translate is the request in the gateway's own form: its client API's
// translation to Chat Completions read, with what else the translation
// made (t, nil for a Chat Completions body, which is its own). A
// translation's Chat Completions form is read from the members it wrote
// when unique says that the client's body has no member name given twice
// at any depth (llm.RequestMembers split it), and decoded otherwise, so
// that the decoder refuses such a name, before the fingerprint does.
func translate(api clientapi.API, caller clientapi.Caller, id string, body []byte, fingerprinted, unique bool) (req *llm.ChatRequest, t clientapi.Translation, err error) {
	chat, t, err := api.Translate(caller, id, body)
	if err != nil {
		return nil, nil, err
	}
	switch {
	case t != nil:
		req, err = chat.Request(unique)
	case fingerprinted:
		// The body is the client's, which its fingerprint checks in full
		// before the request goes on (validate): what the decoder skips
		// over need not be checked twice.
		req, err = llm.DecodeCheckedChatRequest(chat.Bytes())
	default:
		req, err = llm.DecodeChatRequest(chat.Bytes())
	}
	if err != nil {
		return nil, nil, err
	}
	return req, t, nil
}

// checkChat checks a Chat Completions request as splitMembers checks a
// body of another protocol, from the members its decoder split, and
// returns the billable server tools it declares.
func checkChat(spec *clientapi.Spec, h http.Header, req *llm.ChatRequest) ([]llm.ServerTool, error) {
	if name, bad := req.CaseVariant(spec.Owned...); bad {
		return nil, caseVariant(spec, name)
	}
	if v, ok := req.Field("service_tier"); ok {
		if err := checkServiceTier(spec.Proto, v); err != nil {
			return nil, err
		}
	}
	var premium []llm.Member
	for _, name := range []string{"audio", "modalities"} {
		if v, ok := req.Field(name); ok {
			premium = append(premium, llm.Member{Key: name, Value: v})
		}
	}
	if err := checkPremium(spec.Proto, premium, h); err != nil {
		return nil, err
	}
	if v, ok := req.Field("web_search_options"); ok {
		return llm.ServerTools(spec.Proto, []llm.Member{{Key: "web_search_options", Value: v}})
	}
	return nil, nil
}

// caseVariant refuses a field that repeats, or differs only in case from,
// one the gateway owns or sets (spec.Owned).
func caseVariant(spec *clientapi.Spec, name string) error {
	return llm.Errorf(llm.CodeInvalidRequest, name, "field %q repeats, or differs only in case from, a field the gateway sets or owns (%s)", clientapi.Sanitize(name), strings.Join(spec.Owned, ", "))
}

// nativeOf is the client's request kept in its own protocol: its body's
// members, and its protocol headers.
func nativeOf(spec *clientapi.Spec, h http.Header, members []llm.Member, size int) *llm.Native {
	var header http.Header
	for _, name := range spec.Forward {
		if v := h.Values(name); len(v) > 0 {
			if header == nil {
				header = make(http.Header, len(spec.Forward))
			}
			header[name] = v
		}
	}
	return llm.NewNative(spec.Proto, members, size, header)
}

// presentHints lists the hint fields the request sets (not null).
func presentHints(members []llm.Member, hints []string) []string {
	var out []string
	for _, m := range members {
		if string(m.Value) != "null" && slices.Contains(hints, m.Key) && !slices.Contains(out, m.Key) {
			out = append(out, m.Key)
		}
	}
	return out
}

// standardTiers are the service_tier values of each client API that ask
// for the provider's standard prices, which a route's prices are: OpenAI's
// "auto" and "default", Anthropic's "auto" and "standard_only" (its
// Priority Tier, which "auto" may use, is a commitment an operator prices
// into the route).
var standardTiers = map[llm.Proto][]string{
	llm.ProtoChat:      {"auto", "default"},
	llm.ProtoResponses: {"auto", "default"},
	llm.ProtoMessages:  {"auto", "standard_only"},
}

// checkServiceTier refuses a service_tier the provider bills at other
// prices than the route's (OpenAI's "flex", "priority" and "scale"): the
// gateway bills as the provider does, and a route has one set of prices.
func checkServiceTier(proto llm.Proto, raw json.RawMessage) error {
	if string(raw) == "null" {
		return nil
	}
	var tier string
	if json.Unmarshal(raw, &tier) == nil && slices.Contains(standardTiers[proto], tier) {
		return nil
	}
	return llm.Errorf(llm.CodeInvalidRequest, "service_tier", "service_tier %s is not served: a route is priced at the provider's standard tier; send %s or leave it out",
		clientapi.Sanitize(string(raw)), strings.Join(standardTiers[proto], " or "))
}

// maxOutputTokens is the most output a request asks for, in whichever
// field its API names it (0: it does not say), reserved against a tpm.
func maxOutputTokens(field func(name string) (json.RawMessage, bool)) int {
	for _, name := range []string{"max_completion_tokens", "max_tokens", "max_output_tokens"} {
		if v, ok := field(name); ok {
			if n, ok := number(v); ok && n > 0 && n < 1<<31 {
				return int(n)
			}
		}
	}
	return 0
}

// number is raw decoded as json.Unmarshal decodes it into a float64 (ok
// false where that fails; null is 0). A plain integer of up to 15 digits,
// as requests send their limits, is read without reflection
// (BenchmarkNumber, FuzzNumber).
func number(raw json.RawMessage) (float64, bool) {
	if n := len(raw); n > 0 && n <= 15 && (raw[0] != '0' || n == 1) {
		v := int64(0)
		for _, c := range raw {
			if c < '0' || c > '9' {
				return numberJSON(raw)
			}
			v = v*10 + int64(c-'0')
		}
		return float64(v), true
	}
	return numberJSON(raw)
}

func numberJSON(raw json.RawMessage) (float64, bool) {
	var n float64
	err := json.Unmarshal(raw, &n)
	return n, err == nil
}

// maxChoices bounds the n a reserve is multiplied by (OpenAI allows 128):
// a larger one is the provider's to refuse.
const maxChoices = 1 << 10

// choices is the number of choices a request asks for (Chat Completions'
// n; 1 when it does not say), reserved against a tpm as that many times
// its output.
func choices(field func(name string) (json.RawMessage, bool)) int {
	if v, ok := field("n"); ok {
		if n, ok := number(v); ok && n > 1 {
			return int(min(n, maxChoices))
		}
	}
	return 1
}
