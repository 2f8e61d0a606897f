# Quiver make targets. `make test` is the one CI runs.
GO ?= go

.PHONY: test lint race fuzz bench build soak

STATICCHECK ?= honnef.co/go/tools/cmd/staticcheck@v0.8.2

# Interop tests that also run with storage.engine=pebble in `make test`
# (the test server passes QUIVER_STORAGE__ENGINE to mq dev): the SIGKILL
# crash tests and the core send/consume/offset/restart paths.
PEBBLE_INTEROP = TestCrash|TestSendModesAndConsume|TestTwoConsumersSplitQueues|TestTagSubscription|TestOffsetsSurviveConsumerRestart|TestBrokerRestartLosesNothing|TestTransactionCommit

## test: vet and staticcheck, the whole test suite in short mode (-short shortens the crash
## test to 4 SIGKILL rounds and skips only load and soak runs), the race
## detector on core, storage, transport and module packages, and a short run
## of every fuzz target. scripts/gotest.sh re-runs a failed package once and
## reports it as FLAKY if it then passes.
test: lint
	./scripts/gotest.sh -short -count=1 -timeout 30m ./...
	./scripts/gotest.sh -short -count=1 -race -timeout 30m ./core/... ./plugins/storage/... ./plugins/transport/... ./modules/...
	QUIVER_STORAGE__ENGINE=pebble ./scripts/gotest.sh -short -count=1 -timeout 15m -run '$(PEBBLE_INTEROP)' ./interop/
	./scripts/fuzz-short.sh

## lint: go vet and staticcheck (version pinned here; `go run` fetches it
## through the module proxy the first time).
lint:
	$(GO) vet ./...
	$(GO) run $(STATICCHECK) ./...

race:
	$(GO) test -race ./...

## fuzz: run every fuzz target for FUZZTIME each (default 10s).
fuzz:
	FUZZTIME=$${FUZZTIME:-10s} ./scripts/fuzz-short.sh

bench:
	$(GO) test -run='^$$' -bench=. -benchmem ./...

build:
	$(GO) build -o mq ./cmd/mq

## soak: everything at full length: 20 SIGKILL rounds per crash test, the
## load and timer-accuracy runs, plus anything behind the soak build tag.
soak:
	$(GO) test -count=1 -tags soak -timeout 90m ./...
