# Quiver make targets. `make test` is the one CI runs.
GO ?= go

.PHONY: test lint race fuzz bench build soak release crossarch

STATICCHECK ?= honnef.co/go/tools/cmd/staticcheck@v0.8.2

# Interop tests that also run with storage.engine=pebble in `make test`
# (the test server passes QUIVER_STORAGE__ENGINE to mq dev): the SIGKILL
# crash tests and the core send/consume/offset/restart paths.
PEBBLE_INTEROP = TestCrash|TestMaxBodyStored|TestSendModesAndConsume|TestTwoConsumersSplitQueues|TestTagSubscription|TestOffsetsSurviveConsumerRestart|TestBrokerRestartLosesNothing|TestTransactionCommit

## test: vet and staticcheck, the whole test suite in short mode (-short shortens the crash
## test to 4 SIGKILL rounds and skips only load and soak runs), the race
## detector on core, storage, transport and module packages, and a short run
## of every fuzz target, and bench/peers' tests (its own module: the gRPC
## 5.x client rows with tiny counts, skipped without node and
## rocketmq-client-nodejs; -mod=mod follows the root module's requirements
## when bench/peers/go.mod lags behind; and the e2etrace build's timeline,
## about 40 s), and internal/outside: a module of
## its own that builds an app over QUIC and a server with an out-of-tree
## filter the way users do (a replace of Quiver alone), and crossarch (below). scripts/gotest.sh re-runs a failed
## package once and reports it as FLAKY if it then passes.
test: lint
	./scripts/gotest.sh -short -count=1 -timeout 30m ./...
	./scripts/gotest.sh -short -count=1 -race -timeout 30m ./core/... ./plugins/storage/... ./plugins/transport/... ./modules/...
	QUIVER_STORAGE__ENGINE=pebble ./scripts/gotest.sh -short -count=1 -timeout 15m -run '$(PEBBLE_INTEROP)' ./interop/
	./scripts/fuzz-short.sh
	cd bench/peers && $(GO) test -mod=mod -short -count=1 -timeout 10m -run 'TestGRPC|TestWant' .
	cd bench/peers && $(GO) test -mod=mod -count=1 -timeout 10m -run 'TestE2ETraceTimeline' .
	cd internal/outside && $(GO) vet -mod=mod ./... && $(GO) test -mod=mod -count=1 -timeout 10m ./...
	$(MAKE) --no-print-directory crossarch

## crossarch: the broker of linux amd64 (natively), arm64, arm v7 and
## big-endian mips softfloat under qemu-user (.ci/run installs it; each
## target skips with a reason without it), `mq broker --config
## config.edge.yaml` with the commit log and with Pebble (refused at
## start on mips), 3,000 messages sent over TCP and consumed over QUIC
## from the host, and the -tags nogrpc edge build natively; after the
## ./... run, whose TestCrossCompile compiled
## these targets, only the links are new. make soak runs every edge
## target (arm v6, 386, riscv64, mipsle too) with 30,000 messages.
crossarch:
	QUIVER_CROSSARCH=short $(GO) test -count=1 -timeout 8m -run TestBrokerUnderEmulation ./internal/crossarch/

## lint: go vet, staticcheck and golangci-lint (.golangci.yml; versions
## pinned here). staticcheck runs through `go run`, which fetches it from
## the module proxy the first time; golangci-lint is the binary on PATH or
## in $(go env GOPATH)/bin when it is that version (.ci/run installs it),
## else `go run` builds it (a few minutes the first time).
GOLANGCI_LINT_VERSION ?= v2.15.0
GOLANGCI_LINT ?= github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION)

lint:
	$(GO) vet ./...
	$(GO) run $(STATICCHECK) $$($(GO) list ./... | grep -v /quictransport/internal/quic)
	@bin=$$(command -v golangci-lint || echo "$$($(GO) env GOPATH)/bin/golangci-lint"); \
	if [ -x "$$bin" ] && "$$bin" version 2>/dev/null | grep -Eq "version v?$(GOLANGCI_LINT_VERSION:v%=%) "; then \
		echo "$$bin run ./..."; "$$bin" run ./...; \
	else \
		echo "$(GO) run $(GOLANGCI_LINT) run ./..."; $(GO) run $(GOLANGCI_LINT) run ./...; \
	fi

race:
	$(GO) test -race ./...

## fuzz: run every fuzz target for FUZZTIME each (default 10s).
fuzz:
	FUZZTIME=$${FUZZTIME:-10s} ./scripts/fuzz-short.sh

bench:
	$(GO) test -run='^$$' -bench=. -benchmem ./...

build:
	$(GO) build -o mq ./cmd/mq

## release: static (CGO_ENABLED=0), stripped (-s -w, -trimpath) mq binaries
## for RELEASE_TARGETS (os/arch or os/arm/<GOARM>) in dist/, named
## mq-<version>-<os>-<arch>, with VERSION and COMMIT stamped (`mq version`)
## and a SHA256SUMS file. Every target is one of the edge targets that
## internal/lint/crossbuild_test.go builds in CI (TestReleaseTargets checks).
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
RELEASE_TARGETS = linux/amd64 linux/arm64 linux/arm/7 darwin/arm64

release:
	rm -rf dist
	mkdir -p dist
	@set -e; for t in $(RELEASE_TARGETS); do \
		os=$${t%%/*}; rest=$${t#*/}; arch=$${rest%%/*}; arm=""; \
		case $$rest in */*) arm=$${rest#*/};; esac; \
		out=dist/mq-$(VERSION)-$$os-$$arch$${arm:+v$$arm}; \
		echo "go build $$out"; \
		CGO_ENABLED=0 GOOS=$$os GOARCH=$$arch GOARM=$$arm $(GO) build -trimpath \
			-ldflags "-s -w -X main.version=$(VERSION) -X main.commit=$(COMMIT)" -o $$out ./cmd/mq; \
	done
	cd dist && sha256sum mq-* > SHA256SUMS

## soak: everything at full length: 20 SIGKILL rounds per crash test, the
## load and timer-accuracy runs, plus anything behind the soak build tag
## (internal/crossarch: every edge target's broker under qemu-user).
soak:
	$(GO) test -count=1 -tags soak -timeout 90m ./...
