// Package app is buzzgate's composition root: it reads the environment and
// the config, builds the provider adapters, the router and the HTTP handler,
// and hands back one http.Handler. Only functions/* call it.
package app

import (
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/buzzgate/buzzgate/pkg/catalog"
	"github.com/buzzgate/buzzgate/pkg/httpapi"
	"github.com/buzzgate/buzzgate/pkg/llm"
	"github.com/buzzgate/buzzgate/pkg/provider/openai"
	"github.com/buzzgate/buzzgate/pkg/provider/simulated"
	"github.com/buzzgate/buzzgate/pkg/router"
)

// Environment variables (DESIGN.md section 1).
const (
	EnvConfig = "BUZZGATE_CONFIG"
	EnvAddr   = "BUZZGATE_ADDR"
	EnvStore  = "BUZZGATE_STORE"
	EnvTable  = "BUZZGATE_TABLE"

	DefaultAddr = "127.0.0.1:8080"
)

// App is a built gateway.
type App struct {
	Config  *catalog.Config
	Router  *router.Router
	Handler http.Handler
}

// Options are App's dependencies from outside: the environment, a logger
// and a clock, so tests can set each.
type Options struct {
	Getenv func(string) string
	Logger *slog.Logger
	Now    func() time.Time
	// HTTPClient is used by the openai adapters; nil means their default.
	HTTPClient *http.Client
}

// New builds the gateway from the environment: BUZZGATE_CONFIG names the
// config file (unset: the embedded demo config).
func New(opts Options) (*App, error) {
	getenv := opts.Getenv
	if getenv == nil {
		getenv = func(string) string { return "" }
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	switch store := getenv(EnvStore); store {
	case "", "memory":
	default:
		return nil, fmt.Errorf("%s=%q: this build supports only the memory store", EnvStore, store)
	}

	var cfg *catalog.Config
	if path := getenv(EnvConfig); path != "" {
		var err error
		if cfg, err = catalog.Load(path); err != nil {
			return nil, err
		}
	} else {
		cfg = catalog.Demo()
	}
	return FromConfig(cfg, opts)
}

// FromConfig builds the gateway from a validated config.
func FromConfig(cfg *catalog.Config, opts Options) (*App, error) {
	getenv := opts.Getenv
	if getenv == nil {
		getenv = func(string) string { return "" }
	}
	providers := make(map[string]llm.Provider, len(cfg.Providers))
	for _, p := range cfg.Providers {
		switch p.API {
		case "openai":
			key := ""
			if p.APIKeyEnv != "" {
				key = getenv(p.APIKeyEnv)
			}
			providers[p.Name] = openai.New(p.Name, p.BaseURL, key, opts.HTTPClient)
		case "simulated":
			providers[p.Name] = simulated.New(p.Name, p.Simulated)
		default:
			return nil, fmt.Errorf("provider %q: unsupported api %q", p.Name, p.API)
		}
	}
	rt, err := router.New(cfg, providers, nil, opts.Now)
	if err != nil {
		return nil, err
	}
	h := httpapi.New(cfg, rt, httpapi.Options{Logger: opts.Logger, Now: opts.Now})
	return &App{Config: cfg, Router: rt, Handler: h}, nil
}
