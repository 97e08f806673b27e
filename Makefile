# buzzgate. `make run` starts the gateway locally; `make test` runs every check
# and test, installing what it needs into .tools/ first.
SHELL := /bin/bash
GO ?= go
TOOLS := $(CURDIR)/.tools
STATICCHECK_VERSION := v0.8.2
STATICCHECK := $(TOOLS)/bin/staticcheck-$(STATICCHECK_VERSION)
DYNALITE_VERSION := 4.0.0
DYNALITE := $(TOOLS)/dynalite/node_modules/.bin/dynalite
FUZZTIME ?= 30s
BENCHTIME ?= 2s

.PHONY: run build build-ApiFunction test vet lint fmt-check unit bench fuzz tools clean

run:
	$(GO) run ./functions/api

build:
	CGO_ENABLED=0 $(GO) build -trimpath -o bin/api ./functions/api

# SAM's BuildMethod: makefile calls build-<LogicalId> with ARTIFACTS_DIR set.
build-ApiFunction:
	GOOS=linux GOARCH=arm64 CGO_ENABLED=0 $(GO) build -tags lambda.norpc -trimpath -ldflags='-s -w' -o $(ARTIFACTS_DIR)/bootstrap ./functions/api

test: fmt-check vet lint unit

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './.tools/*')); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet ./...

lint: $(STATICCHECK)
	$(STATICCHECK) ./...

# The DynamoDB store's tests start dynalite (a local DynamoDB stand-in) themselves.
unit: $(DYNALITE)
	$(GO) test -race -count=1 ./...

bench:
	$(GO) test -run='^$$' -bench=. -benchmem -benchtime=$(BENCHTIME) ./...

# Runs every fuzz target for FUZZTIME each.
fuzz:
	@set -e; for pkg in $$($(GO) list ./...); do \
	  for f in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz' || true); do \
	    echo "== $$pkg $$f"; $(GO) test -run='^$$' -fuzz="^$$f$$" -fuzztime=$(FUZZTIME) $$pkg; \
	  done; \
	done

tools: $(STATICCHECK) $(DYNALITE)

$(STATICCHECK):
	mkdir -p $(TOOLS)/bin
	GOBIN=$(TOOLS)/bin $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)
	mv $(TOOLS)/bin/staticcheck $@

$(DYNALITE):
	mkdir -p $(TOOLS)/dynalite
	npm install --prefix $(TOOLS)/dynalite --no-audit --no-fund dynalite@$(DYNALITE_VERSION)

clean:
	rm -rf bin .aws-sam
