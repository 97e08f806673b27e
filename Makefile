# buzzgate. `make run` starts the gateway locally; `make test` runs every check
# and test, installing what it needs into .tools/ first; `make unit` runs the
# unit tests, which need only Go.
SHELL := /bin/bash
GO ?= go
TOOLS := $(CURDIR)/.tools
STATICCHECK_VERSION := v0.8.2
STATICCHECK := $(TOOLS)/bin/staticcheck-$(STATICCHECK_VERSION)
# deadcode (golang.org/x/tools) lists the functions no binary reaches.
DEADCODE_VERSION := v0.52.0
DEADCODE := $(TOOLS)/bin/deadcode-$(DEADCODE_VERSION)
DYNALITE_VERSION := 4.0.0
DYNALITE := $(TOOLS)/dynalite/node_modules/.bin/dynalite
# The official Node SDKs, for internal/systemtest's TestNodeSDK* tests,
# which find their node_modules through BUZZGATE_NODE_SDKS (or
# .tools/sdks/node_modules). The stamp names both versions, so changing a
# pin reinstalls. openai 7 needs Node 22; these run on Node 20.
OPENAI_NODE_VERSION := 6.30.1
ANTHROPIC_NODE_VERSION := 1.15.0
NODE_SDKS_DIR := $(TOOLS)/sdks/node_modules
NODE_SDKS := $(NODE_SDKS_DIR)/.buzzgate-openai-$(OPENAI_NODE_VERSION)-anthropic-$(ANTHROPIC_NODE_VERSION)
# The Codex CLI, for internal/codexcli's tests, which find the executable
# through BUZZGATE_CODEX (or .tools/codex/bin/codex). npm installs the
# wrapper package and, of its optional dependencies, the one holding the
# native binary for this platform (vendor/<target>/bin/codex); the link
# points at that binary, so the tests need no node. The stamp names the
# version, so changing the pin reinstalls.
CODEX_VERSION := 0.169.0
CODEX_DIR := $(TOOLS)/codex
CODEX := $(CODEX_DIR)/bin/codex
CODEX_STAMP := $(CODEX_DIR)/node_modules/.buzzgate-codex-$(CODEX_VERSION)
# The tokenizer's vocabularies (pkg/tokenize), o200k_base and cl100k_base,
# from the tiktoken npm package (MIT): the gateway reads them from
# BUZZGATE_TOKENIZER_DIR, and the Lambda build puts them beside the
# bootstrap. The stamp names the version, so changing the pin reinstalls.
TIKTOKEN_VERSION := 1.0.22
TOKENIZER_DIR := $(TOOLS)/tokenizer
TOKENIZER := $(TOKENIZER_DIR)/.buzzgate-tiktoken-$(TIKTOKEN_VERSION)
# The AWS Lambda Runtime Interface Emulator, from the Go module proxy. The
# tests find it as .tools/bin/aws-lambda-rie (a link to the pinned version)
# or through BUZZGATE_RIE.
RIE_VERSION := v0.0.0-20261030222936-bef5c4ba774d
RIE := $(TOOLS)/bin/aws-lambda-rie-$(RIE_VERSION)
RIE_LINK := $(TOOLS)/bin/aws-lambda-rie
FUZZTIME ?= 30s
BENCHTIME ?= 2s

# The Lambda bootstrap's build: static, no RPC shim, reproducible, stripped.
LAMBDA_BUILD := CGO_ENABLED=0 $(GO) build -tags lambda.norpc -trimpath -ldflags='-s -w'
# `make invoke` and `make coldstart` run a bootstrap built for this machine
# (linux/amd64 here; the deployed one is linux/arm64).
LOCAL_GOARCH ?= $(shell $(GO) env GOHOSTARCH)
LOCAL_BOOTSTRAP := bin/local/bootstrap
# make invoke EVENT='events/chat-completion-keyed.json events/chat-completion-keyed-replay.json'
EVENT ?= events/chat-completion.json
# The idempotency store of `make invoke`: dynamodb (on dynalite) or memory.
STORE ?= dynamodb
COLDSTART_RUNS ?= 20
# The tools module (tools/, its own go.mod) holds the load generator and the
# cold-start harness, so that their dependencies stay out of the product's
# go.mod. Their commands are built into bin/tools/ and run from here, so that
# the paths they take (ARGS included) are relative to the repository.
TOOLS_BIN := bin/tools

.PHONY: run build build-ApiFunction build-SweepFunction admin test vet lint fmt-check tidy-check unit test-all bench soak fuzz tools clean \
	bootstrap-local invoke coldstart bench-load tools-check licenses image

# The tokenizer's vocabularies are used when installed (make tools), so that
# make run needs only Go.
run:
	BUZZGATE_TOKENIZER_DIR=$${BUZZGATE_TOKENIZER_DIR:-$(if $(wildcard $(TOKENIZER)),$(TOKENIZER_DIR))} $(GO) run ./functions/api

build:
	CGO_ENABLED=0 $(GO) build -trimpath -o bin/api ./functions/api

# SAM's BuildMethod: makefile calls build-<LogicalId> with ARTIFACTS_DIR set;
# by hand, without it, the artifacts go under bin/ (never the file system's
# root).
build-ApiFunction: ARTIFACTS_DIR ?= $(CURDIR)/bin/arm64
build-ApiFunction: $(TOKENIZER)
	mkdir -p $(ARTIFACTS_DIR)/tokenizer
	GOOS=linux GOARCH=arm64 $(LAMBDA_BUILD) -o $(ARTIFACTS_DIR)/bootstrap ./functions/api
	cp deploy/config.yaml $(ARTIFACTS_DIR)/config.yaml
	cp $(TOKENIZER_DIR)/*.json $(ARTIFACTS_DIR)/tokenizer/

# The scheduled billing sweep (no config file: it only reconciles the ledger).
build-SweepFunction: ARTIFACTS_DIR ?= $(CURDIR)/bin/sweep-arm64
build-SweepFunction:
	mkdir -p $(ARTIFACTS_DIR)
	GOOS=linux GOARCH=arm64 $(LAMBDA_BUILD) -o $(ARTIFACTS_DIR)/bootstrap ./functions/sweep

# The container image, built without a container engine (tools/image): an
# OCI image layout tar holding linux/amd64 and linux/arm64 (IMAGE), and
# beside it one tar per platform in `docker save`'s format
# (bin/buzzgate-image-amd64.docker.tar, ...-arm64...). The binaries are the
# Lambda build's (static), so both share Go's build cache; the same inputs
# give the same bytes (SOURCE_DATE_EPOCH, default 0, stamps every file).
IMAGE ?= bin/buzzgate-image.tar
IMAGE_ARCHES := amd64 arm64
image: $(TOKENIZER)
	@set -e; for arch in $(IMAGE_ARCHES); do \
	  echo "build linux/$$arch"; \
	  GOOS=linux GOARCH=$$arch $(LAMBDA_BUILD) -o bin/image/linux-$$arch/buzzgate ./functions/api; \
	done
	$(GO) -C tools build -o $(CURDIR)/$(TOOLS_BIN)/image ./image
	$(TOOLS_BIN)/image $(foreach a,$(IMAGE_ARCHES),-$(a) bin/image/linux-$(a)/buzzgate) -tokenizer $(TOKENIZER_DIR) -out $(IMAGE)

# The admin tool for accounts and keys, e.g. make admin ARGS="show --project acme".
admin:
	$(GO) run ./functions/admin $(ARGS)

# The bootstrap for this machine, for the emulator and the cold-start runs.
bootstrap-local:
	GOOS=linux GOARCH=$(LOCAL_GOARCH) $(LAMBDA_BUILD) -o $(LOCAL_BOOTSTRAP) ./functions/api

# Invokes the bootstrap under the Lambda emulator with sample events (one
# after another, in one execution environment) against DynamoDB on dynalite,
# and prints each decoded response. Everything it starts is stopped by PID.
invoke: bootstrap-local $(RIE_LINK) $(DYNALITE)
	BUZZGATE_RIE=$(RIE) BUZZGATE_DYNALITE=$(DYNALITE) $(GO) run ./internal/invoke -bootstrap $(LOCAL_BOOTSTRAP) -store $(STORE) $(EVENT)

# The deployed bootstrap's size, and its init time against a fake Runtime API
# (tools/coldstart).
coldstart: bootstrap-local
	$(MAKE) --no-print-directory build-ApiFunction ARTIFACTS_DIR=$(CURDIR)/bin/arm64
	$(GO) -C tools build -o $(CURDIR)/$(TOOLS_BIN)/coldstart ./coldstart
	$(TOOLS_BIN)/coldstart -bootstrap $(LOCAL_BOOTSTRAP) -size bin/arm64/bootstrap -runs $(COLDSTART_RUNS)

# The tests come in two tiers. The unit tier needs only Go (`make unit`).
# The integration tier, in the files tagged `//go:build integration`, starts
# what it needs itself: dynalite (a local DynamoDB stand-in), the Lambda
# emulator and node with the official SDKs. `make test` checks the code
# and runs both tiers under the race detector, the unit tier again as a
# machine with only Go runs it, then the tools module's checks.
test: fmt-check vet lint tidy-check test-all unit tools-check

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './.tools/*')); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet ./...
	$(GO) vet -tags integration ./...

# Every file is in the integration build, so one run covers both tiers.
# A product function that only tests reach belongs in the tests: deadcode
# must find nothing unreachable from the binaries (functions/*).
lint: $(STATICCHECK) $(DEADCODE)
	$(STATICCHECK) -tags integration ./...
	@out=$$($(DEADCODE) ./functions/...) || exit 1; \
	if [ -n "$$out" ]; then echo "$$out"; echo "reachable from no binary: move it into the tests, or delete it"; exit 1; fi

# The tools module's checks: `go vet ./...` and `go test ./...` here do not
# reach into tools/, a module of its own. Its integration tier builds the
# container image (tools/image) and runs it.
tools-check: $(STATICCHECK) $(TOKENIZER)
	cd tools && $(GO) vet -tags integration ./...
	cd tools && $(STATICCHECK) -tags integration ./...
	cd tools && $(GO) mod tidy -diff
	cd tools && BUZZGATE_TOKENIZER_DIR=$(TOKENIZER_DIR) $(GO) test -count=1 -tags integration ./...

tidy-check:
	$(GO) mod tidy -diff

# The unit tier as a machine with only Go runs it: no tool variables, a PATH
# that holds nothing but the go command (so no node, no C compiler: cgo off).
BARE_PATH := $(TOOLS)/bare-path
unit:
	mkdir -p $(BARE_PATH)
	ln -sfn "$$(command -v $(GO))" $(BARE_PATH)/go
	env -u BUZZGATE_RIE -u BUZZGATE_NODE_SDKS -u BUZZGATE_DYNALITE -u BUZZGATE_CODEX PATH=$(BARE_PATH) CGO_ENABLED=0 \
		go test -count=1 ./...

# Both tiers in one run, with the tools installed first.
test-all: $(DYNALITE) $(RIE_LINK) $(NODE_SDKS) $(CODEX_STAMP) $(TOKENIZER)
	BUZZGATE_RIE=$(RIE) BUZZGATE_NODE_SDKS=$(NODE_SDKS_DIR) BUZZGATE_CODEX=$(CODEX) BUZZGATE_TOKENIZER_DIR=$(TOKENIZER_DIR) $(GO) test -race -count=1 -tags integration ./...

# Every benchmark, those on dynalite included.
bench: $(DYNALITE)
	$(GO) test -tags integration -run='^$$' -bench=. -benchmem -benchtime=$(BENCHTIME) ./...

# Keyed and unkeyed requests against stores that fail now and then; fails
# unless spend = ledger = the answers the clients received.
SOAK_REQUESTS ?= 2000
soak:
	$(GO) test -run='^$$' -bench=Soak -benchtime=$(SOAK_REQUESTS)x ./internal/systemtest

# The load benchmark (tools/loadbench/doc.go): builds the gateway and a
# loopback mock upstream, runs them as separate processes and measures
# latency at fixed rates (direct and through the gateway), closed-loop
# throughput, peak RSS, keyed requests, replays and streams, in under 3
# minutes. Writes bin/bench-load/load.md and load.png; UPDATE=1 rewrites
# bench/load.md and bench/load.png, the figures the repository keeps.
# Another binary:
#   make bench-load ARGS='-gateway /tmp/buzzgate-api-old -out bin/bench-load/old -label old'
# CPU and allocation profiles of the gateway's closed loop: ARGS='-profile DIR'.
bench-load:
	$(GO) -C tools build -o $(CURDIR)/$(TOOLS_BIN)/loadbench ./loadbench
	$(TOOLS_BIN)/loadbench $(if $(filter 1,$(UPDATE)),-out bench/load) $(ARGS)

# Rewrites docs/licenses.md, the licences of the modules the binaries link
# (internal/licenses); its test, in both tiers, fails when the file is out
# of date or a licence is not allowed.
licenses:
	$(GO) test -count=1 -run '^TestDoc$$' ./internal/licenses -args -update

# Runs every fuzz target for FUZZTIME each.
fuzz:
	@set -e; for pkg in $$($(GO) list ./...); do \
	  for f in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz' || true); do \
	    echo "== $$pkg $$f"; $(GO) test -run='^$$' -fuzz="^$$f$$" -fuzztime=$(FUZZTIME) $$pkg; \
	  done; \
	done

tools: $(STATICCHECK) $(DEADCODE) $(DYNALITE) $(RIE_LINK) $(NODE_SDKS) $(CODEX_STAMP) $(TOKENIZER)

$(STATICCHECK):
	mkdir -p $(TOOLS)/bin
	GOBIN=$(TOOLS)/bin $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)
	mv $(TOOLS)/bin/staticcheck $@

$(DEADCODE):
	mkdir -p $(TOOLS)/bin
	GOBIN=$(TOOLS)/bin $(GO) install golang.org/x/tools/cmd/deadcode@$(DEADCODE_VERSION)
	mv $(TOOLS)/bin/deadcode $@

$(RIE):
	mkdir -p $(TOOLS)/bin
	rm -f $(RIE_LINK) # go install must not write through an old version's link
	GOBIN=$(TOOLS)/bin $(GO) install github.com/aws/aws-lambda-runtime-interface-emulator/cmd/aws-lambda-rie@$(RIE_VERSION)
	mv $(TOOLS)/bin/aws-lambda-rie $@

$(RIE_LINK): $(RIE)
	ln -sfn $(notdir $<) $@

$(DYNALITE):
	mkdir -p $(TOOLS)/dynalite
	npm install --prefix $(TOOLS)/dynalite --no-audit --no-fund dynalite@$(DYNALITE_VERSION)

$(NODE_SDKS):
	mkdir -p $(TOOLS)/sdks
	rm -f $(NODE_SDKS_DIR)/.buzzgate-openai-*
	npm install --prefix $(TOOLS)/sdks --no-audit --no-fund --save-exact \
		openai@$(OPENAI_NODE_VERSION) @anthropic-ai/sdk@$(ANTHROPIC_NODE_VERSION)
	touch $@

$(TOKENIZER):
	rm -rf $(TOKENIZER_DIR)
	mkdir -p $(TOKENIZER_DIR)
	cd $(TOKENIZER_DIR) && npm pack --silent tiktoken@$(TIKTOKEN_VERSION) >/dev/null
	tar -xzf $(TOKENIZER_DIR)/tiktoken-$(TIKTOKEN_VERSION).tgz -C $(TOKENIZER_DIR) --strip-components=2 \
		package/encoders/o200k_base.json package/encoders/cl100k_base.json
	rm $(TOKENIZER_DIR)/tiktoken-$(TIKTOKEN_VERSION).tgz
	touch $@

$(CODEX_STAMP):
	mkdir -p $(CODEX_DIR)/bin
	rm -f $(CODEX_DIR)/node_modules/.buzzgate-codex-* $(CODEX)
	npm install --prefix $(CODEX_DIR) --no-audit --no-fund --save-exact --include=optional \
		@openai/codex@$(CODEX_VERSION)
	bin=$$(ls -d $(CODEX_DIR)/node_modules/@openai/codex-*/vendor/*/bin/codex) && ln -sfn "$$bin" $(CODEX)
	$(CODEX) --version | grep -qx 'codex-cli $(CODEX_VERSION)'
	touch $@

clean:
	rm -rf bin .aws-sam
