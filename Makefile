# walcast — see README.md. `make test` is what CI runs.
GO        ?= go
GOBIN     := $(shell $(GO) env GOPATH)/bin
PKGS      := ./...
TESTFLAGS ?= -race -timeout 30m
FUZZTIME  ?= 3s
BENCHTIME ?= 1s

.PHONY: all build test setup fmt-check vet lint unit fuzz fuzz-smoke bench demo clean

all: build

setup:
	./scripts/setup.sh

build:
	$(GO) build $(PKGS)
	$(GO) build -o bin/cast ./cmd/cast

# The full gate: formatting, vet (also for darwin), staticcheck, the race-enabled
# test suite of both modules, and a short run of every fuzz target.
test: setup fmt-check vet lint unit fuzz-smoke

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet $(PKGS)
	GOOS=darwin $(GO) vet $(PKGS)
	@if [ -f bench/go.mod ]; then cd bench && $(GO) vet ./...; fi

lint:
	$(GOBIN)/staticcheck $(PKGS)
	@if [ -f bench/go.mod ]; then cd bench && $(GOBIN)/staticcheck ./...; fi

# Tests named TestLarge* run at full scale without the race detector (which
# slows them 5-20x); everything else runs under -race.
unit:
	$(GO) test $(TESTFLAGS) -skip '^TestLarge' $(PKGS)
	$(GO) test -timeout 30m -run '^TestLarge' $(PKGS)
	@if [ -f bench/go.mod ]; then cd bench && $(GO) test $(TESTFLAGS) ./...; fi

fuzz-smoke:
	FUZZTIME=$(FUZZTIME) ./scripts/fuzz.sh

fuzz:
	FUZZTIME=5m ./scripts/fuzz.sh

# Go micro-benchmarks; `cast bench` runs the side-by-side suite.
bench: setup
	$(GO) test -run '^$$' -bench . -benchmem -benchtime $(BENCHTIME) $(PKGS)
	@if [ -f bench/go.mod ]; then cd bench && $(GO) run ./cmd/report; fi

demo: build
	./bin/cast demo

clean:
	rm -rf bin
