package catalog

import (
	"fmt"
	"maps"
	"math"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MinKeyLength is the shortest API key a project may declare. Keys are bearer
// tokens, so a one-letter key would be trivially guessed; the bound is 7
// rather than 8 because the demo key "sk-demo" (pkg/catalog/demo.yaml,
// shown in the README) has 7 characters.
const MinKeyLength = 7

// FieldError is the one error a bad config produces: the first problem found,
// in a fixed order (document order for YAML problems; for the rest,
// providers, models, projects, idempotency, server, health, each in list
// order and field order).
type FieldError struct {
	// Path names the field the way the config file nests it, for example
	// "models[0].routes[1].provider". It is empty when the problem is the
	// document as a whole (a YAML syntax error).
	Path string
	// Message says what is wrong. It never quotes an API key.
	Message string
	// Line is the 1-based line of the problem in the YAML source, or 0 when
	// it is not known (problems found after decoding, by Validate).
	Line int
}

// Error renders "config: line N: path: message", leaving out the parts that
// are unknown, e.g. `config: models[0].routes[1].provider: unknown provider "beta"`.
func (e *FieldError) Error() string {
	var b strings.Builder
	b.WriteString("config: ")
	if e.Line > 0 {
		b.WriteString("line ")
		b.WriteString(strconv.Itoa(e.Line))
		b.WriteString(": ")
	}
	if e.Path != "" {
		b.WriteString(e.Path)
		b.WriteString(": ")
	}
	b.WriteString(e.Message)
	return b.String()
}

// MaxNameBytes bounds a provider name, a model id and a project id: each is
// written into the ledger with every bill (billing.MaxIDBytes is this
// bound), so a longer one would be refused there, after its answer was
// served.
const MaxNameBytes = 256

func fieldErr(path, format string, args ...any) *FieldError {
	return &FieldError{Path: path, Message: fmt.Sprintf(format, args...)}
}

// Validate checks c and returns the first problem as a *FieldError, or nil.
// It expects defaults to be applied already (Parse does that; see
// ApplyDefaults), so an unset field with a default is reported as out of
// range here. On success it (re)builds the index behind Model, Provider,
// Project and KeyOwner; on failure the index is dropped. Validate writes to
// c, so do not call it while other goroutines read c.
func (c *Config) Validate() error {
	c.idx = nil
	idx := &index{
		providers: make(map[string]int, len(c.Providers)),
		models:    make(map[string]int, len(c.Models)),
		projects:  make(map[string]int, len(c.Projects)),
		keys:      make(map[keyHash]keyRef),
	}
	if err := c.validateProviders(idx); err != nil {
		return err
	}
	if err := c.validateModels(idx); err != nil {
		return err
	}
	if err := c.validateProjects(idx); err != nil {
		return err
	}
	if err := c.validateSettings(); err != nil {
		return err
	}
	c.idx = idx
	return nil
}

// checkName checks a provider name, model id or project id (what names
// which) at the field path at: not empty, and at most MaxNameBytes.
func checkName(at, what, name string) error {
	switch {
	case name == "":
		return fieldErr(at, "must not be empty")
	case len(name) > MaxNameBytes:
		return fieldErr(at, "%s is %d bytes long: at most %d", what, len(name), MaxNameBytes)
	}
	return nil
}

// record enters name at position i in the index table pos, refusing a
// name the table already holds.
func record(pos map[string]int, name string, i int, at, what string) error {
	if _, dup := pos[name]; dup {
		return fieldErr(at, "duplicate %s %q", what, name)
	}
	pos[name] = i
	return nil
}

func (c *Config) validateProviders(idx *index) error {
	if len(c.Providers) == 0 {
		return fieldErr("providers", "at least one provider is required")
	}
	for i := range c.Providers {
		p := &c.Providers[i]
		at := fmt.Sprintf("providers[%d]", i)
		if err := checkName(at+".name", "provider name", p.Name); err != nil {
			return err
		}
		if !isProviderName(p.Name) {
			return fieldErr(at+".name", "invalid provider name %q: use only letters, digits, '.', '_' and '-'", p.Name)
		}
		if err := record(idx.providers, p.Name, i, at+".name", "provider name"); err != nil {
			return err
		}

		switch p.API {
		case "":
			return fieldErr(at+".api", `is required: "openai", "openai-responses", "anthropic", "bedrock" or "simulated"`)
		case "openai", "openai-responses", "anthropic":
			if err := checkBaseURL(p.API, p.BaseURL); err != "" {
				return fieldErr(at+".base_url", "%s", err)
			}
		case "bedrock":
			if !isAWSRegion(p.AWSRegion) {
				return fieldErr(at+".aws_region", "is required for api: bedrock, a region such as \"us-east-1\", got %q", p.AWSRegion)
			}
			if p.BaseURL != "" {
				if err := checkBaseURL(p.API, p.BaseURL); err != "" {
					return fieldErr(at+".base_url", "%s", err)
				}
			}
			if p.APIKeyEnv != "" {
				return fieldErr(at+".api_key_env", "is not used by api: bedrock, which signs its calls with the AWS SDK's credentials")
			}
		case "simulated":
			// In-process: base_url is not used.
		default:
			return fieldErr(at+".api", `must be "openai", "openai-responses", "anthropic", "bedrock" or "simulated", got %q`, p.API)
		}
		if p.APIKeyEnv != "" && !isEnvName(p.APIKeyEnv) {
			return fieldErr(at+".api_key_env", "invalid environment variable name %q: want letters, digits and '_', not starting with a digit", p.APIKeyEnv)
		}
		if p.FirstTokenTimeout <= 0 {
			return fieldErr(at+".first_token_timeout", "must be > 0, got %s", p.FirstTokenTimeout)
		}
		if p.Region != "" && !isRegion(p.Region) {
			return fieldErr(at+".region", "invalid region %q: use lowercase letters, digits and '-' (e.g. \"eu\", \"us-east\")", p.Region)
		}
		if p.DataCollection != "allow" && p.DataCollection != "deny" {
			return fieldErr(at+".data_collection", `must be "allow" or "deny", got %q`, p.DataCollection)
		}
		switch p.ProviderObjects {
		case "", "refuse", "allow":
		default:
			return fieldErr(at+".provider_objects", `must be "refuse" or "allow", got %q`, p.ProviderObjects)
		}
		switch p.MaxTokensField {
		case "", "max_completion_tokens":
		case "max_tokens":
			if p.API != "openai" {
				return fieldErr(at+".max_tokens_field", "is only for api: openai")
			}
		default:
			return fieldErr(at+".max_tokens_field", `must be "max_completion_tokens" or "max_tokens", got %q`, p.MaxTokensField)
		}
		if p.API == "simulated" {
			if err := validateSimulated(at+".simulated", &p.Simulated); err != nil {
				return err
			}
		}
	}
	return nil
}

func validateSimulated(at string, s *Simulated) error {
	if s.FirstTokenLatency < 0 {
		return fieldErr(at+".first_token_latency", "must not be negative, got %s", s.FirstTokenLatency)
	}
	if s.ChunkLatency < 0 {
		return fieldErr(at+".chunk_latency", "must not be negative, got %s", s.ChunkLatency)
	}
	switch s.Fail {
	case "", "error", "throttle", "reject", "hang":
	default:
		return fieldErr(at+".fail", `must be empty or one of "error", "throttle", "reject", "hang", got %q`, s.Fail)
	}
	switch s.Protocol {
	case "", "openai", "anthropic":
	default:
		return fieldErr(at+".protocol", `must be "openai" or "anthropic", got %q`, s.Protocol)
	}
	if s.Words < 1 || s.Words > MaxSimulatedWords {
		return fieldErr(at+".words", "must be between 1 and %d, got %d", MaxSimulatedWords, s.Words)
	}
	return nil
}

func (c *Config) validateModels(idx *index) error {
	if len(c.Models) == 0 {
		return fieldErr("models", "at least one model is required")
	}
	for i := range c.Models {
		m := &c.Models[i]
		at := fmt.Sprintf("models[%d]", i)
		if err := checkName(at+".id", "model id", m.ID); err != nil {
			return err
		}
		switch {
		case strings.Contains(m.ID, ":"):
			// ":floor" and ":nitro" are request suffixes (docs/api.md#fields-the-gateway-owns);
			// an id with a colon would make them ambiguous.
			return fieldErr(at+".id", "invalid model id %q: must not contain ':' (reserved for suffixes such as \":floor\")", m.ID)
		case strings.IndexFunc(m.ID, unicode.IsSpace) >= 0:
			return fieldErr(at+".id", "invalid model id %q: must not contain whitespace", m.ID)
		}
		if msg := checkText(m.ID); msg != "" {
			return fieldErr(at+".id", "invalid model id %q: %s", m.ID, msg)
		}
		if err := record(idx.models, m.ID, i, at+".id", "model id"); err != nil {
			return err
		}

		if len(m.Routes) == 0 {
			return fieldErr(at+".routes", "at least one route is required")
		}
		seen := make(map[string]int, len(m.Routes))
		for j := range m.Routes {
			r := &m.Routes[j]
			rat := fmt.Sprintf("%s.routes[%d]", at, j)
			if r.Provider == "" {
				return fieldErr(rat+".provider", "must not be empty")
			}
			if _, ok := idx.providers[r.Provider]; !ok {
				return fieldErr(rat+".provider", "unknown provider %q", r.Provider)
			}
			// Fallback never calls a failed provider again, so listing one
			// twice is a mistake rather than a retry policy.
			if first, dup := seen[r.Provider]; dup {
				return fieldErr(rat+".provider", "provider %q is already routed at %s.routes[%d]", r.Provider, at, first)
			}
			seen[r.Provider] = j
			if r.Model == "" {
				return fieldErr(rat+".model", "must not be empty: name the model to send upstream")
			}
			if msg := checkText(r.Model); msg != "" {
				return fieldErr(rat+".model", "invalid upstream model %q: %s", r.Model, msg)
			}
			if !isAmount(r.InputPrice) {
				return fieldErr(rat+".input_price", "must be a finite number >= 0, got %v", r.InputPrice)
			}
			if !isAmount(r.OutputPrice) {
				return fieldErr(rat+".output_price", "must be a finite number >= 0, got %v", r.OutputPrice)
			}
			if r.CacheReadPrice != nil && !isAmount(*r.CacheReadPrice) {
				return fieldErr(rat+".cache_read_price", "must be a finite number >= 0, got %v", *r.CacheReadPrice)
			}
			if r.CacheWritePrice != nil && !isAmount(*r.CacheWritePrice) {
				return fieldErr(rat+".cache_write_price", "must be a finite number >= 0, got %v", *r.CacheWritePrice)
			}
			if r.CacheWrite1hPrice != nil && !isAmount(*r.CacheWrite1hPrice) {
				return fieldErr(rat+".cache_write_1h_price", "must be a finite number >= 0, got %v", *r.CacheWrite1hPrice)
			}
			for _, tool := range slices.Sorted(maps.Keys(r.ToolPrices)) {
				if msg := checkToolName(tool); msg != "" {
					return fieldErr(rat+".tool_prices", "invalid tool type %q: %s", tool, msg)
				}
				if price := r.ToolPrices[tool]; !isAmount(price) {
					return fieldErr(rat+".tool_prices."+tool, "must be a finite number >= 0 (USD per call), got %v", price)
				}
			}
			if r.MaxOutputTokens < 0 {
				return fieldErr(rat+".max_output_tokens", "must be >= 0 (0: not known), got %d", r.MaxOutputTokens)
			}
		}
	}
	return c.validateFallbacks(idx)
}

// validateFallbacks checks every model's fallbacks once every model id is
// known: each names another model, once. Only direct fallbacks are used (a
// fallback's own fallbacks are not followed), so a cycle (a: [b], b: [a])
// cannot loop and is allowed.
func (c *Config) validateFallbacks(idx *index) error {
	for i := range c.Models {
		m := &c.Models[i]
		seen := make(map[string]int, len(m.Fallbacks))
		for j, id := range m.Fallbacks {
			at := fmt.Sprintf("models[%d].fallbacks[%d]", i, j)
			switch _, known := idx.models[id]; {
			case id == "":
				return fieldErr(at, "must not be empty: name a model id")
			case id == m.ID:
				return fieldErr(at, "model %q cannot be its own fallback", id)
			case !known:
				return fieldErr(at, "unknown model %q", id)
			}
			if first, dup := seen[id]; dup {
				return fieldErr(at, "model %q is already a fallback at models[%d].fallbacks[%d]", id, i, first)
			}
			seen[id] = j
		}
	}
	return nil
}

func (c *Config) validateProjects(idx *index) error {
	for i := range c.Projects {
		p := &c.Projects[i]
		at := fmt.Sprintf("projects[%d]", i)
		if err := checkName(at+".id", "project id", p.ID); err != nil {
			return err
		}
		if strings.IndexFunc(p.ID, unicode.IsSpace) >= 0 {
			return fieldErr(at+".id", "invalid project id %q: must not contain whitespace", p.ID)
		}
		if msg := checkText(p.ID); msg != "" {
			return fieldErr(at+".id", "invalid project id %q: %s", p.ID, msg)
		}
		if err := record(idx.projects, p.ID, i, at+".id", "project id"); err != nil {
			return err
		}

		if p.Balance != nil && !isAmount(*p.Balance) {
			return fieldErr(at+".balance", "must be a finite number >= 0, got %v", *p.Balance)
		}
		switch p.DataPolicy {
		case "none", "zdr", "deny":
		default:
			return fieldErr(at+".data_policy", `must be "none", "zdr" or "deny", got %q`, p.DataPolicy)
		}
		switch p.Residency {
		case "anywhere", "eu":
		default:
			return fieldErr(at+".residency", `must be "anywhere" or "eu", got %q`, p.Residency)
		}
		if p.MaxInFlight < 0 {
			return fieldErr(at+".max_in_flight", "must be >= 0 (0: no bound but server.max_in_flight), got %d", p.MaxInFlight)
		}
		if err := checkBudget(at+".budget", p.Budget); err != nil {
			return err
		}
		if err := checkRates(at, p.RPM, p.TPM); err != nil {
			return err
		}

		for j := range p.Keys {
			k := &p.Keys[j]
			kat := fmt.Sprintf("%s.keys[%d]", at, j)
			// Messages below name the key by its path only: a config error
			// ends up in logs, and the key is a secret.
			if k.Key == "" {
				return fieldErr(kat+".key", "must not be empty")
			}
			if len(k.Key) < MinKeyLength {
				return fieldErr(kat+".key", "too short: a key needs at least %d characters", MinKeyLength)
			}
			if !isTokenText(k.Key) {
				return fieldErr(kat+".key", "must be printable ASCII without spaces (it is sent as a bearer token)")
			}
			h := hashKey(k.Key)
			if prev, dup := idx.keys[h]; dup {
				return fieldErr(kat+".key", "duplicate key: the same key is projects[%d].keys[%d].key", prev.project, prev.key)
			}
			idx.keys[h] = keyRef{project: i, key: j}
			if k.Limit != nil && !isAmount(*k.Limit) {
				return fieldErr(kat+".limit", "must be a finite number >= 0, got %v", *k.Limit)
			}
			if err := checkBudget(kat+".budget", k.Budget); err != nil {
				return err
			}
			if err := checkRates(kat, k.RPM, k.TPM); err != nil {
				return err
			}
		}
	}
	return nil
}

// validateSettings checks the idempotency, server and health sections.
func (c *Config) validateSettings() error {
	idem, s := &c.Idempotency, &c.Server
	if err := firstErr(
		positive("idempotency.window", idem.Window),
		positive("idempotency.lease", idem.Lease),
		positive("idempotency.max_response_bytes", idem.MaxResponseBytes),
		positive("idempotency.max_wait", idem.MaxWait),
		positive("idempotency.memory_bytes", idem.MemoryBytes),
		positive("server.max_in_flight", s.MaxInFlight),
		positive("server.max_body_bytes", s.MaxBodyBytes),
		positive("server.request_timeout", s.RequestTimeout),
	); err != nil {
		return err
	}
	if s.RequestTimeout.D() > MaxRequestTimeout {
		return fieldErr("server.request_timeout", "must be at most %s, got %s", Duration(MaxRequestTimeout), s.RequestTimeout)
	}
	if err := firstErr(positive("server.body_timeout", s.BodyTimeout), positive("server.write_timeout", s.WriteTimeout)); err != nil {
		return err
	}
	// A key is remembered for the window from its reservation. A window
	// that ends while the first call may still be running (its ceiling,
	// plus a lease for a dead owner's record to lapse) would let a retry
	// reserve the key again and run the request a second time.
	if min := s.RequestTimeout.D() + idem.Lease.D(); idem.Window.D() <= min {
		return fieldErr("idempotency.window", "must be longer than server.request_timeout + idempotency.lease (%s), got %s", Duration(min), idem.Window)
	}

	return firstErr(positive("health.failure_threshold", c.Health.FailureThreshold), positive("health.cooldown", c.Health.Cooldown))
}

// positive checks that the setting at path is above zero (a count, a size
// or a Duration, which the message shows as written in the config).
func positive[T ~int | ~int64](path string, v T) error {
	if v <= 0 {
		return fieldErr(path, "must be > 0, got %v", v)
	}
	return nil
}

// firstErr is the first of errs that is not nil, the checks' order.
func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// checkBaseURL returns what is wrong with the base_url of an api: openai,
// openai-responses or anthropic provider, or "". An anthropic base_url is
// the API root (the adapter appends /v1/messages), so it needs no /v1.
func checkBaseURL(api, s string) string {
	if s == "" {
		if api == "anthropic" {
			return "is required for api: anthropic (e.g. \"https://api.anthropic.com\")"
		}
		return "is required for api: " + api + " (e.g. \"https://api.example.com/v1\")"
	}
	u, err := url.Parse(s)
	switch {
	case err != nil:
		return "invalid URL " + showURL(s)
	case u.Scheme != "http" && u.Scheme != "https":
		return "invalid URL " + showURL(s) + ": want an absolute http:// or https:// URL"
	case u.Host == "":
		return "invalid URL " + showURL(s) + ": no host"
	case u.User != nil:
		// The URL is logged and shown in errors; the upstream key belongs
		// in the environment.
		return "must not contain credentials: name the variable holding the key in api_key_env"
	case u.RawQuery != "" || u.Fragment != "" || strings.ContainsAny(s, "?#"):
		// Request paths are appended to base_url, which a query or
		// fragment would swallow.
		return "invalid URL " + showURL(s) + ": must not have a query or fragment"
	}
	return ""
}

// isAWSRegion reports whether s looks like an AWS region name
// ("us-east-1", "eu-central-2", "us-gov-west-1").
func isAWSRegion(s string) bool {
	parts := strings.Split(s, "-")
	if len(parts) < 3 || len(s) > 32 {
		return false
	}
	for i, p := range parts {
		if p == "" {
			return false
		}
		for _, r := range p {
			digit, lower := r >= '0' && r <= '9', r >= 'a' && r <= 'z'
			if !lower && !(digit && i == len(parts)-1) {
				return false
			}
		}
	}
	return true
}

// showURL quotes a base_url for an error message, unless it may hold
// credentials ("https://user:secret@host").
func showURL(s string) string {
	if strings.Contains(s, "@") {
		return "(not shown: it contains '@', which may be credentials)"
	}
	return strconv.Quote(s)
}

// isAmount reports whether f is a usable price or amount of USD: finite and
// not negative (NaN fails the comparison).
func isAmount(f float64) bool { return f >= 0 && !math.IsInf(f, 1) }

func isProviderName(s string) bool {
	for _, r := range s {
		if !(isASCIILetter(r) || isDigit(r) || r == '.' || r == '_' || r == '-') {
			return false
		}
	}
	return true
}

func isEnvName(s string) bool {
	for i, r := range s {
		if !(isASCIILetter(r) || r == '_' || (i > 0 && isDigit(r))) {
			return false
		}
	}
	return s != ""
}

func isRegion(s string) bool {
	for _, r := range s {
		if !((r >= 'a' && r <= 'z') || isDigit(r) || r == '-') {
			return false
		}
	}
	return true
}

// isTokenText reports whether s can travel as a bearer token in an
// Authorization header: visible ASCII, no spaces.
func isTokenText(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// checkText returns what is wrong with a name that ends up in JSON, headers
// and logs, or "": it must be valid UTF-8 without control characters (YAML's
// double-quoted escapes can produce both).
func checkText(s string) string {
	if !utf8.ValidString(s) {
		return "must be valid UTF-8"
	}
	if strings.IndexFunc(s, unicode.IsControl) >= 0 {
		return "must not contain control characters"
	}
	return ""
}

// checkToolName checks a key of tool_prices: a server tool's type as the
// gateway names it, in lower case, without the version date some APIs add
// (web_search, not web_search_20250305 or web_search_2025_08_26).
func checkToolName(s string) string {
	if s == "" || len(s) > 64 {
		return "want 1 to 64 characters"
	}
	for i, r := range s {
		if !(r >= 'a' && r <= 'z') && !(i > 0 && (isDigit(r) || r == '_')) {
			return "want lower-case letters, digits and '_', starting with a letter"
		}
	}
	if trimmed := trimToolDate(s); trimmed != s {
		return fmt.Sprintf("name the type without its version date: %q", trimmed)
	}
	return ""
}

// trimToolDate is a server tool's type less a trailing version date,
// _YYYYMMDD (Anthropic's) or _YYYY_MM_DD (OpenAI's).
func trimToolDate(s string) string {
	allDigits := func(t string) bool {
		return t != "" && strings.IndexFunc(t, func(r rune) bool { return !isDigit(r) }) < 0
	}
	if i := len(s) - 9; i > 0 && s[i] == '_' && allDigits(s[i+1:]) {
		return s[:i]
	}
	if i := len(s) - 11; i > 0 && s[i] == '_' && allDigits(s[i+1:i+5]) && s[i+5] == '_' && allDigits(s[i+6:i+8]) && s[i+8] == '_' && allDigits(s[i+9:]) {
		return s[:i]
	}
	return s
}

func isASCIILetter(r rune) bool { return (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') }
func isDigit(r rune) bool       { return r >= '0' && r <= '9' }

// checkBudget checks an optional budget at path.
func checkBudget(path string, b *Budget) error {
	if b == nil {
		return nil
	}
	if !isAmount(b.Amount) {
		return fieldErr(path+".amount", "must be a finite number >= 0, got %v", b.Amount)
	}
	switch b.Period {
	case "day", "week", "month":
	default:
		return fieldErr(path+".period", `must be "day", "week" or "month", got %q`, b.Period)
	}
	return nil
}

// checkRates checks a project's or key's rpm and tpm at path.
func checkRates(path string, rpm, tpm int64) error {
	if rpm < 0 {
		return fieldErr(path+".rpm", "must be >= 0 (0: none), got %d", rpm)
	}
	if tpm < 0 {
		return fieldErr(path+".tpm", "must be >= 0 (0: none), got %d", tpm)
	}
	return nil
}
