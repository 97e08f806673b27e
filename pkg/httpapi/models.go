package httpapi

import (
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/buzzgate/buzzgate/pkg/catalog"
	"github.com/buzzgate/buzzgate/pkg/clientapi"
	"github.com/buzzgate/buzzgate/pkg/llm"
)

// The models endpoints, GET (and HEAD) /api/v1/models and
// /api/v1/models/{id}, answer in the shape of the API the client speaks: a
// request with an anthropic-version header (every Anthropic SDK sends one)
// gets Anthropic's Models API shapes and error envelope, any other
// OpenAI's. The answers depend on the config alone, so the same config
// always answers the same bytes.

const (
	// modelsCreatedAt is every model's creation time: the config carries no
	// release date, and Anthropic documents the Unix epoch for a release
	// date that is not known. OpenAI's "created" is the same instant, 0.
	modelsCreatedAt = "1970-01-01T00:00:00Z"
	// Anthropic's list page bounds.
	defaultModelsLimit = 20
	maxModelsLimit     = 1000
)

// modelCatalog is what the models endpoints answer, built once from the
// config.
type modelCatalog struct {
	// openAIList is the OpenAI list body; openAI each model's object, by
	// id.
	openAIList []byte
	openAI     map[string][]byte
	// anthropic holds Anthropic's model objects in config order; index
	// their positions, by id.
	anthropic []anthropicModel
	index     map[string]int
}

// openAIModel is a model in OpenAI's shape, with the gateway's providers
// and prices beside it.
type openAIModel struct {
	ID        string          `json:"id"`
	Object    string          `json:"object"`
	Created   int64           `json:"created"`
	OwnedBy   string          `json:"owned_by"`
	Providers []modelProvider `json:"providers"`
	// Fallbacks are the models tried after this one's providers, listed
	// when the model has any (catalog.Model.Fallbacks).
	Fallbacks []string `json:"fallbacks,omitempty"`
}

type modelProvider struct {
	Name        string  `json:"name"`
	Model       string  `json:"model"`
	InputPrice  llm.USD `json:"input_price"`
	OutputPrice llm.USD `json:"output_price"`
	CacheRead   llm.USD `json:"cache_read_price"`
	CacheWrite  llm.USD `json:"cache_write_price"`
	// CacheWrite1h and ToolPrices are listed when the route sets them.
	CacheWrite1h   *llm.USD           `json:"cache_write_1h_price,omitempty"`
	ToolPrices     map[string]llm.USD `json:"tool_prices,omitempty"`
	Region         string             `json:"region,omitempty"`
	ZDR            bool               `json:"zdr"`
	DataCollection string             `json:"data_collection"`
}

// anthropicModel is Anthropic's ModelInfo. What the config does not say (a
// model's capabilities, its context window, its line) is null, as
// Anthropic's schema allows; every model of the config is active.
type anthropicModel struct {
	Type           string    `json:"type"`
	ID             string    `json:"id"`
	DisplayName    string    `json:"display_name"`
	CreatedAt      string    `json:"created_at"`
	Capabilities   *struct{} `json:"capabilities"`
	MaxInputTokens *int      `json:"max_input_tokens"`
	MaxTokens      *int      `json:"max_tokens"`
	Lifecycle      string    `json:"lifecycle"`
	Line           *string   `json:"line"`
	DeprecatedAt   *string   `json:"deprecated_at"`
	RetiresAt      *string   `json:"retires_at"`
}

// anthropicModelPage is a page of Anthropic's model list.
type anthropicModelPage struct {
	Data    []anthropicModel `json:"data"`
	HasMore bool             `json:"has_more"`
	FirstID *string          `json:"first_id"`
	LastID  *string          `json:"last_id"`
}

func newModelCatalog(cfg *catalog.Config) *modelCatalog {
	c := &modelCatalog{openAI: map[string][]byte{}, index: map[string]int{}}
	list := struct {
		Object string        `json:"object"`
		Data   []openAIModel `json:"data"`
	}{Object: "list", Data: []openAIModel{}}
	for _, m := range cfg.Models {
		e := openAIModel{ID: m.ID, Object: "model", OwnedBy: "buzzgate", Providers: []modelProvider{}, Fallbacks: m.Fallbacks}
		for _, rt := range m.Routes {
			p, _ := cfg.Provider(rt.Provider)
			e.Providers = append(e.Providers, modelProvider{
				Name: rt.Provider, Model: rt.Model, InputPrice: llm.USD(rt.InputPrice), OutputPrice: llm.USD(rt.OutputPrice), CacheRead: llm.USD(rt.CacheRead()), CacheWrite: llm.USD(rt.CacheWrite()),
				CacheWrite1h: usdPtr(rt.CacheWrite1hPrice), ToolPrices: usdMap(rt.ToolPrices), Region: p.Region, ZDR: p.ZDR, DataCollection: p.DataCollection,
			})
		}
		list.Data = append(list.Data, e)
		b, _ := json.Marshal(e)
		c.openAI[m.ID] = append(b, '\n')
		c.index[m.ID] = len(c.anthropic)
		c.anthropic = append(c.anthropic, anthropicModel{Type: "model", ID: m.ID, DisplayName: m.ID,
			CreatedAt: modelsCreatedAt, Lifecycle: "active"})
	}
	b, _ := json.Marshal(list)
	c.openAIList = append(b, '\n')
	return c
}

// serveModelList serves GET and HEAD /api/v1/models.
func (s *Server) serveModelList(w *clientapi.Recorder, r *http.Request) {
	s.serveModels(w, r, "", false)
}

// serveModel serves GET and HEAD /api/v1/models/{id...}: id is the model
// id, path-escaped or not.
func (s *Server) serveModel(w *clientapi.Recorder, r *http.Request) {
	s.serveModels(w, r, r.PathValue("id"), true)
}

// modelsErrors is the envelope of the models endpoints' errors for r:
// Anthropic's for a client that sends anthropic-version, OpenAI's for any
// other. The answer depends on that header, so a cache must not serve one
// client's to the other: it is named in Vary, on every answer.
func modelsErrors(w http.ResponseWriter, r *http.Request) errorWriter {
	w.Header().Add("Vary", "Anthropic-Version")
	if r.Header.Get("Anthropic-Version") != "" {
		return clientapi.WriteAnthropicError
	}
	return clientapi.WriteError
}

// serveModels answers the models list or, when one, model id. Any query
// is ignored but, on Anthropic's list, limit, after_id, before_id and
// lifecycle.
func (s *Server) serveModels(w *clientapi.Recorder, r *http.Request, id string, one bool) {
	errorf := modelsErrors(w, r)
	anthropic := r.Header.Get("Anthropic-Version") != ""
	if _, err := s.authenticate(r); err != nil {
		errorf(w, err)
		return
	}
	var body []byte
	switch {
	case one:
		i, ok := s.models.index[id]
		if !ok {
			errorf(w, llm.Errorf(llm.CodeModelNotFound, "model", "model %q does not exist", clientapi.Sanitize(id)))
			return
		}
		if anthropic {
			body, _ = json.Marshal(s.models.anthropic[i])
			body = append(body, '\n')
		} else {
			body = s.models.openAI[id]
		}
	case anthropic:
		page, err := s.models.anthropicPage(r.URL.Query())
		if err != nil {
			errorf(w, err)
			return
		}
		body, _ = json.Marshal(page)
		body = append(body, '\n')
	default:
		body = s.models.openAIList
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		w.Write(body)
	}
}

// anthropicPage is the page of Anthropic's list that q asks for, the
// models in config order: limit of them (1 to 1000, default 20) from the
// start, or right after the model after_id names, or right before the one
// before_id names (not both); has_more says whether more are left in that
// direction. lifecycle (repeated, as lifecycle[], or comma-separated: active,
// deprecated, retired) keeps the models in those stages: every model of the
// config is active.
func (c *modelCatalog) anthropicPage(q url.Values) (*anthropicModelPage, error) {
	limit := defaultModelsLimit
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxModelsLimit {
			return nil, llm.Errorf(llm.CodeInvalidRequest, "limit", "limit must be a whole number from 1 to %d", maxModelsLimit)
		}
		limit = n
	}
	models := c.anthropic
	if stages := slices.Concat(q["lifecycle"], q["lifecycle[]"]); len(stages) > 0 {
		active := false
		for _, v := range stages {
			for _, stage := range strings.Split(v, ",") {
				switch strings.TrimSpace(stage) {
				case "active":
					active = true
				case "deprecated", "retired":
				default:
					return nil, llm.Errorf(llm.CodeInvalidRequest, "lifecycle", "lifecycle must be active, deprecated or retired")
				}
			}
		}
		if !active {
			models = nil
		}
	}
	cursor := func(param string) (int, error) {
		id := q.Get(param)
		for i, m := range models {
			if m.ID == id {
				return i, nil
			}
		}
		return 0, llm.Errorf(llm.CodeInvalidRequest, param, "%s %q is not a model in this list", param, clientapi.Sanitize(id))
	}
	after, before := q.Get("after_id") != "", q.Get("before_id") != ""
	from, to := 0, min(limit, len(models))
	switch {
	case after && before:
		return nil, llm.Errorf(llm.CodeInvalidRequest, "before_id", "send after_id or before_id, not both")
	case after:
		i, err := cursor("after_id")
		if err != nil {
			return nil, err
		}
		from, to = i+1, min(i+1+limit, len(models))
	case before:
		i, err := cursor("before_id")
		if err != nil {
			return nil, err
		}
		from, to = max(i-limit, 0), i
	}
	page := &anthropicModelPage{Data: models[from:to:to]}
	if before {
		page.HasMore = from > 0
	} else {
		page.HasMore = to < len(models)
	}
	if page.Data == nil {
		page.Data = []anthropicModel{}
	}
	if n := len(page.Data); n > 0 {
		page.FirstID, page.LastID = &page.Data[0].ID, &page.Data[n-1].ID
	}
	return page, nil
}

func usdPtr(f *float64) *llm.USD {
	if f == nil {
		return nil
	}
	u := llm.USD(*f)
	return &u
}

func usdMap(m map[string]float64) map[string]llm.USD {
	if m == nil {
		return nil
	}
	out := make(map[string]llm.USD, len(m))
	for k, v := range m {
		out[k] = llm.USD(v)
	}
	return out
}
