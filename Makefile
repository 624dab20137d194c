# walcast — see README.md. `make test` is what CI runs.
GO        ?= go
SHELL     := /bin/bash
.SHELLFLAGS := -o pipefail -c
GOBIN     := $(shell $(GO) env GOPATH)/bin
PKGS      := ./...
TESTFLAGS ?= -race -timeout 30m
FUZZTIME  ?= 3s
BENCHTIME ?= 1s

.PHONY: all build test check stress-test setup fmt-check vet lint unit fuzz fuzz-smoke bench demo clean

all: build

setup:
	./scripts/setup.sh

build:
	$(GO) build $(PKGS)
	GOOS=windows $(GO) build $(PKGS)
	GOOS=darwin $(GO) build $(PKGS)
	GOOS=freebsd $(GO) build $(PKGS)
	$(GO) build -buildvcs=auto -o bin/cast ./cmd/cast
	@if [ -f bench/go.mod ]; then cd bench && $(GO) build -o ../bin/cast-bench ./cmd/cast-bench; fi

# The full gate: formatting, vet (also for darwin), staticcheck, the race-enabled
# test suite of both modules, and a short run of every fuzz target.
test: setup fmt-check vet lint unit fuzz-smoke

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

# The module builds and vets on every GOOS a user may have; Linux is where
# the fast paths are (see docs/portability.md).
vet:
	$(GO) vet $(PKGS)
	GOOS=darwin $(GO) vet $(PKGS)
	GOOS=freebsd $(GO) vet $(PKGS)
	GOOS=windows $(GO) vet $(PKGS)
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

# The fast development lane: gofmt, vet (linux and darwin), staticcheck and
# the tests that are neither TestLarge* nor -short-skipped, without the
# race detector, of PKGS (default all; the bench module only then):
#   make check PKGS=./wal/          make check PKGS='./cast/... ./replay'
# Test results are cached as `go test` caches them; CHECKFLAGS=-count=1
# reruns them.
CHECKFLAGS ?=
check: fmt-check
	$(GO) vet $(PKGS)
	GOOS=darwin $(GO) vet $(PKGS)
	$(GOBIN)/staticcheck $(PKGS)
	$(GO) test -json -short -p 1 -timeout 10m $(CHECKFLAGS) -skip '^TestLarge' $(PKGS) | $(TESTSUM)
	@if [ "$(PKGS)" = ./... ] && [ -f bench/go.mod ]; then cd bench && $(GO) vet ./... && $(GOBIN)/staticcheck ./... && \
		$(GO) test -json -short -p 1 -timeout 10m $(CHECKFLAGS) ./... | $(GO) run ../internal/testsum; fi

# The load lane: every TestLarge* test, then every test of the packages
# that use real sockets (STRESS_PKGS), without the race detector, one
# package at a time, while bin/burn keeps STRESS_BURN CPUs busy (default 1:
# on a 2-vCPU machine the tests' sender and receiver loops share what is
# left). burn is started and stopped here; it also exits by itself when
# this shell is gone. Load averages are printed before and after.
# Run it under the test lock on a shared machine:
#   flock /tmp/walcast-test.lock make stress-test
STRESS_BURN ?= 1
STRESS_PKGS ?= ./cast ./batch ./datapath/... ./replay ./cmd/cast ./internal/benchkit
STRESS_RUN  ?=
stress-test:
	$(GO) build -o bin/burn ./internal/burn
	@echo "stress: load before: $$(cut -d' ' -f1-3 /proc/loadavg); burning $(STRESS_BURN) CPU(s)"
	@./bin/burn -n $(STRESS_BURN) -for 2h & burn=$$!; trap 'kill $$burn 2>/dev/null; wait $$burn 2>/dev/null' EXIT; \
	sleep 1; rc=0; \
	if [ -z "$(STRESS_RUN)" ]; then \
		$(GO) test -json -count=1 -p 1 -timeout 40m -run '^TestLarge' $(PKGS) | $(TESTSUM) || rc=1; \
		$(GO) test -json -count=1 -p 1 -timeout 40m -skip '^TestLarge' $(STRESS_PKGS) | $(TESTSUM) || rc=1; \
	else \
		$(GO) test -json -count=1 -p 1 -timeout 40m -run '$(STRESS_RUN)' $(STRESS_PKGS) | $(TESTSUM) || rc=1; \
	fi; \
	echo "stress: load after: $$(cut -d' ' -f1-3 /proc/loadavg)"; exit $$rc

fuzz-smoke:
	FUZZTIME=$(FUZZTIME) ./scripts/fuzz.sh

fuzz:
	FUZZTIME=5m ./scripts/fuzz.sh

# Go micro-benchmarks, then the side-by-side suite (bin/cast-bench, also
# `cast bench all`): bench/out/{report.md,results.json,*.png}, and together
# from the same run docs/bench.md's figures block and docs/bench/ (plots,
# report.md, run.txt; TestPublishedTogether checks they match); then issue 11's pinned in-loop one-way
# latency bench (`cast bench latency`: bench/out/latency.txt), then the per-record CPU cost breakdown
# (`cast bench cost`: bench/out/cost.txt, docs/bench.md "Where the CPU goes"), then issue 11's throughput-under-loss runs (cast send -wal →
# cast recv -drop 1/10/30 at default flags, interleaved with lossless ones: scripts/lossratio.sh →
# bench/out/lossratio.txt). Each step takes the bench lock itself, so on the
# shared machine `make bench` is the one command (BENCHLOCK= to skip it).
BENCHLOCK ?= flock /tmp/walcast-bench.lock
bench: setup build
	$(BENCHLOCK) $(GO) test -run '^$$' -bench . -benchmem -benchtime $(BENCHTIME) $(PKGS)
	$(BENCHLOCK) ./bin/cast-bench -out bench/out -readme docs/bench.md -docs docs/bench all
	@mkdir -p bench/out
	$(BENCHLOCK) sh -c './bin/cast bench latency >bench/out/latency.txt; s=$$?; cat bench/out/latency.txt; exit $$s'
	$(BENCHLOCK) sh -c './bin/cast bench cost >bench/out/cost.txt; s=$$?; cat bench/out/cost.txt; exit $$s'
	$(BENCHLOCK) sh -c 'DROPS="1 10 30" scripts/lossratio.sh >bench/out/lossratio.txt; s=$$?; cat bench/out/lossratio.txt; exit $$s'

demo: build
	./bin/cast demo

clean:
	rm -rf bin
