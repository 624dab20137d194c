# walcast — see README.md. `make test` is what CI runs.
GO        ?= go
SHELL     := /bin/bash
.SHELLFLAGS := -o pipefail -c
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
	@if [ -f bench/go.mod ]; then cd bench && $(GO) build -o ../bin/cast-bench ./cmd/cast-bench; fi

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
# slows them 5-20x), one package at a time (-p 1: two packages' spinning
# sender and receiver loops would otherwise share 2 cores four ways);
# everything else runs under -race.
# Each pass pipes `go test -json` through internal/testsum, which keeps the
# usual ok/FAIL lines, lists every skipped test with its reason, and closes
# with "tests: N passed, N failed, N skipped".
TESTSUM := $(GO) run ./internal/testsum
unit:
	$(GO) test -json -p 1 -timeout 30m -run '^TestLarge' $(PKGS) | $(TESTSUM)
	$(GO) test -json $(TESTFLAGS) -skip '^TestLarge' $(PKGS) | $(TESTSUM)
	@if [ -f bench/go.mod ]; then cd bench && $(GO) test -json $(TESTFLAGS) ./... | $(GO) run ../internal/testsum; fi

fuzz-smoke:
	FUZZTIME=$(FUZZTIME) ./scripts/fuzz.sh

fuzz:
	FUZZTIME=5m ./scripts/fuzz.sh

# Go micro-benchmarks, then the side-by-side suite (bin/cast-bench, also
# `cast bench all`): bench/out/{report.md,results.json,*.png} and the
# README's figures block. On a shared machine wrap it:
# flock /tmp/walcast-bench.lock make bench
bench: setup build
	$(GO) test -run '^$$' -bench . -benchmem -benchtime $(BENCHTIME) $(PKGS)
	./bin/cast-bench -out bench/out -readme README.md all

demo: build
	./bin/cast demo

clean:
	rm -rf bin
