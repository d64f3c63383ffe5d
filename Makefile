# oGPU network. `make devnet` runs a round end to end; `make test` is what CI runs.
GO        ?= go
BIN       ?= bin
# Packages with goroutines of their own: run under the race detector.
RACE_PKGS ?= ./chain/... ./internal/... ./store/... ./node/... ./cmd/... ./devnet/... ./loadgen/... ./wallet/... ./runtime/... ./split/... ./gateway/... ./console/... ./metrics/...
FUZZTIME  ?= 30s
# LEVEL is the x86-64 micro-architecture level llama.cpp's ggml (runtime/llm)
# is compiled for: x86-64 (ollama's stock build: -O3, no SIMD beyond SSE2),
# x86-64-v2, x86-64-v3 (AVX2, FMA, F16C, BMI2), x86-64-v4 (AVX-512) or
# native. The default is the network's level, x86-64-v3, where this CPU has
# it (scripts/cpu-level), else the stock build. A binary refuses to load a
# model on a CPU without its level (llm.CheckCPU), and the compiled
# features are part of the determinism class: replicas compare only within
# one level. docs/benchmarks.md "llama.cpp build level" has the speed.
LEVEL     ?= $(shell scripts/cpu-level)
ifneq ($(LEVEL),x86-64)
export CGO_CFLAGS   := -O3 -march=$(LEVEL)
export CGO_CXXFLAGS := -O3 -march=$(LEVEL)
endif

.PHONY: all build test unit race wordsize vet lint fmt fuzz bench bench-smoke devnet soak clean contracts-check console-assets loadtest

all: build

# The console's chart library, uPlot (MIT), pinned by console/ui's
# lockfile: npm ci installs it and its two dist files are copied where
# go:embed picks them up (console/web/static/vendor, gitignored: no copy
# in git). A plain go build works without them: the charts then show
# their data as tables and say to run this.
CONSOLE_UI     := console/ui
CONSOLE_VENDOR := console/web/static/vendor
CONSOLE_ASSETS := $(CONSOLE_VENDOR)/uPlot.iife.min.js $(CONSOLE_VENDOR)/uPlot.min.css

console-assets: $(CONSOLE_ASSETS)

$(CONSOLE_UI)/node_modules/.package-lock.json: $(CONSOLE_UI)/package.json $(CONSOLE_UI)/package-lock.json
	cd $(CONSOLE_UI) && npm ci --no-audit --no-fund

$(CONSOLE_VENDOR)/%: $(CONSOLE_UI)/node_modules/.package-lock.json
	mkdir -p $(CONSOLE_VENDOR)
	cp $(CONSOLE_UI)/node_modules/uplot/dist/$* $@

build: console-assets
	$(GO) build -o $(BIN)/ ./cmd/ogpud ./cmd/ogpu

# The README's test command: vet, formatting, every test, then the race
# detector on the concurrent packages.
test: export OGPU_REQUIRE_CONSOLE_ASSETS := 1
# The process tests that run llama.cpp (e2e's TestPerturbationShort) fail
# rather than skip without the shared model.
test: export OGPU_REQUIRE_MODEL := 1
# The console's browser tests write their 1280x800 screenshots (explorer,
# job, client and provider pages) here.
test: export OGPU_CONSOLE_SCREENSHOTS := $(CURDIR)/out/console-screenshots
test: console-assets lint contracts-check unit race wordsize bench-smoke

unit:
	$(GO) test -count=1 ./...

# TestDevnet (package ./devnet) runs in unit and as make devnet, not here:
# under the race detector with every package testing in parallel on a
# 2-core machine, its pipeline round's 52 MB key fetch and the validator's
# input check outran their windows (the chain then refunds: no_input), a
# load outcome, not a race; its agents' code is raced by the node/agent
# tests, and the devnet package's other tests run here. TestBridgeE2E
# (./cmd/cli) runs in unit only, for the same reason: every party of it
# (geth, the validators, the relay, the providers) is a separate process
# built without -race, so the race run would only add ~90 s of load.
# TestPerturbationShort (./e2e, ~2 minutes) runs in unit only, like
# TestBridgeE2E: every party of it is a separate process built without
# -race (its proxy has its own race-run test, TestProxyPartitionHeal).
# node/agent alone takes 450 s of the 10-minute default under -race on CI's
# 2 cores (every test a real chain and libp2p hosts): 30 minutes per
# package, as make bench's long benchmarks have.
race:
	$(GO) test -race -count=1 -timeout 30m -skip '^(TestDevnet|TestBridgeE2E)$$' $(RACE_PKGS)

# CKKS evaluation is only deterministic on 64-bit builds: he refuses to
# compile for 32-bit ones. Checked by building (never running) a GOARCH=386
# package: the build must fail with he's message, and the amd64 one pass.
wordsize:
	@$(GO) build ./he/
	@if out=$$(GOARCH=386 CGO_ENABLED=0 $(GO) build ./he/ 2>&1); then \
	  echo "wordsize: GOARCH=386 build of ./he/ succeeded: it must be refused"; exit 1; \
	fi; \
	if ! echo "$$out" | grep -q 'he_refuses_32_bit_builds__CKKS_evaluation_is_only_deterministic_on_64_bit_builds'; then \
	  echo "wordsize: GOARCH=386 build of ./he/ failed, but not with he's 32-bit refusal:"; echo "$$out"; exit 1; \
	fi; \
	echo "wordsize: GOARCH=386 build of ./he/ refused as it must be"

# contracts/artifacts and contracts/bindings.go are what the pinned
# toolchain builds from contracts/src (rebuilt in a temporary folder and
# compared). The artifacts part needs contracts/node_modules (cd contracts &&
# npm ci; .ci/run does it) and is skipped with a message without it.
contracts-check:
	GO=$(GO) scripts/contracts-check.sh

vet:
	$(GO) vet ./...

lint: vet
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed on:"; echo "$$out"; exit 1; fi

fmt:
	gofmt -w $$(git ls-files '*.go')

fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzDecodeTx$$' -fuzztime $(FUZZTIME) ./types
	$(GO) test -run '^$$' -fuzz '^FuzzCheckTx$$' -fuzztime $(FUZZTIME) ./chain
	$(GO) test -run '^$$' -fuzz '^FuzzMarketMsgs$$' -fuzztime $(FUZZTIME) ./chain
	$(GO) test -run '^$$' -fuzz '^FuzzDecodeMarketMsg$$' -fuzztime $(FUZZTIME) ./market
	$(GO) test -run '^$$' -fuzz '^FuzzDecodeVerifierMsg$$' -fuzztime $(FUZZTIME) ./verifier
	$(GO) test -run '^$$' -fuzz '^FuzzDecodeEscrowMsg$$' -fuzztime $(FUZZTIME) ./escrow
	$(GO) test -run '^$$' -fuzz '^FuzzDecodeExtension$$' -fuzztime $(FUZZTIME) ./bridge
	$(GO) test -run '^$$' -fuzz '^FuzzUnmarshalCiphertext$$' -fuzztime $(FUZZTIME) ./he
	$(GO) test -run '^$$' -fuzz '^FuzzCiphertextMetadata$$' -fuzztime $(FUZZTIME) ./he
	$(GO) test -run '^$$' -fuzz '^FuzzUnmarshalEvalKeys$$' -fuzztime $(FUZZTIME) ./he
	$(GO) test -run '^$$' -fuzz '^FuzzParseModel$$' -fuzztime $(FUZZTIME) ./he
	$(GO) test -run '^$$' -fuzz '^FuzzPeek$$' -fuzztime $(FUZZTIME) ./he

bench:
	$(GO) test -run '^$$' -bench BenchmarkTransfers -benchtime 2000x -count 3 ./node
	$(GO) test -run '^$$' -bench BenchmarkTransferPhases -benchtime 10x -count 3 ./chain
	$(GO) test -run '^$$' -bench 'BenchmarkAuction(Close|Reveal)' -benchtime 5x -count 3 ./chain
	$(GO) test -run '^$$' -bench BenchmarkEndBlockClose -benchtime 1x -count 1 -timeout 30m ./chain
	$(GO) test -run '^$$' -bench BenchmarkStateGrowth -benchtime 1x -count 1 -timeout 30m ./chain
	$(GO) test -run '^$$' -bench BenchmarkCacheIterateNarrow -count 3 ./store
	$(GO) test -run '^$$' -bench BenchmarkSplitDecode -benchtime 10x -count 3 ./runtime/llm
	$(GO) test -run '^$$' -bench 'BenchmarkSplit(Loopback|Workers)' -benchtime 4x -count 3 ./runtime/stagehost
	$(GO) test -run '^$$' -bench . -count 3 ./split
	$(GO) test -run '^$$' -bench BenchmarkGatewaySession -benchtime 20x -count 3 ./gateway
	$(GO) test -run '^$$' -bench OpenCheckpoints -benchtime 200x -count 3 ./finetune
	$(GO) test -run '^$$' -bench TrainStep -benchtime 100x -benchmem -count 3 ./runtime/llm/train
	$(GO) test -run '^$$' -bench ValidatorVsRun -benchtime 3x -count 3 ./runtime/llm/train
	$(GO) test -run '^$$' -bench CheckStepVsRun -benchtime 3x -count 3 ./node/ftwork

# Every benchmark of make bench, once, at its smallest size: part of make
# test, so that a benchmark (an anchor of docs/benchmarks.md) cannot break
# silently. The figures come from make bench, never from this.
bench-smoke:
	$(GO) test -run '^$$' -bench BenchmarkTransfers -benchtime 1x -count 1 ./node
	$(GO) test -run '^$$' -bench 'BenchmarkTransferPhases$$|BenchmarkAuctionClose$$|BenchmarkAuctionReveal$$|BenchmarkAuctionCloseJobs/jobs=100$$' -benchtime 1x -count 1 ./chain
	$(GO) test -run '^$$' -bench 'BenchmarkEndBlockClose/jobs=250$$' -benchtime 1x -count 1 ./chain
	$(GO) test -short -run '^$$' -bench 'BenchmarkStateGrowth/jobs=500/retain=100$$' -benchtime 1x -count 1 ./chain
	$(GO) test -run '^$$' -bench BenchmarkCacheIterateNarrow -benchtime 1x -count 1 ./store
	$(GO) test -run '^$$' -bench BenchmarkSplitDecode -benchtime 1x -count 1 ./runtime/llm
	$(GO) test -run '^$$' -bench 'BenchmarkSplit(Loopback|Workers)' -benchtime 1x -count 1 ./runtime/stagehost
	$(GO) test -run '^$$' -bench . -benchtime 1x -count 1 ./split
	$(GO) test -run '^$$' -bench BenchmarkGatewaySession -benchtime 1x -count 1 ./gateway
	$(GO) test -run '^$$' -bench OpenCheckpoints -benchtime 1x -count 1 ./finetune
	$(GO) test -run '^$$' -bench 'TrainStep|ValidatorVsRun' -benchtime 1x -count 1 ./runtime/llm/train
	$(GO) test -run '^$$' -bench CheckStepVsRun -benchtime 1x -count 1 ./node/ftwork

# Tokens/s of the LEVEL build against -march=native, alternating in one run.
bench-level:
	scripts/bench-level.sh $(LEVEL)

# The perturbation suite's soak (e2e TestSoak): the short run's
# perturbations in a cycle under a continuous job load for OGPU_SOAK, then
# its summary (docs/benchmarks.md "Perturbation suite and soak").
OGPU_SOAK ?= 30m
soak:
	OGPU_SOAK=$(OGPU_SOAK) OGPU_REQUIRE_MODEL=1 $(GO) test -count=1 -v -run '^TestSoak$$' -timeout 3h ./e2e

devnet: console-assets
	$(GO) run ./cmd/ogpud devnet

# Issue 17's sustained figure: a 4-validator loopback testnet at 1 s blocks
# under `ogpud loadgen` (market messages, 1,000 tx/s, 5 minutes), then
# stopped. Settings through the environment: see scripts/loadtest.sh.
loadtest:
	scripts/loadtest.sh

clean:
	rm -rf $(BIN)
