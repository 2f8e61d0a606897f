# Quiver make targets. `make test` is the one CI runs.
GO ?= go

.PHONY: test race fuzz bench build soak

## test: vet, the whole test suite (short mode skips only soak/load runs),
## the race detector on core, storage and broker packages, and a short run
## of every fuzz target.
test:
	$(GO) vet ./...
	$(GO) test -count=1 -timeout 20m ./...
	$(GO) test -count=1 -race -timeout 20m ./core/... ./plugins/storage/... ./plugins/transport/... ./modules/...
	./scripts/fuzz-short.sh

race:
	$(GO) test -race ./...

## fuzz: run every fuzz target for FUZZTIME each (default 10s).
fuzz:
	FUZZTIME=$${FUZZTIME:-10s} ./scripts/fuzz-short.sh

bench:
	$(GO) test -run='^$$' -bench=. -benchmem ./...

build:
	$(GO) build -o mq ./cmd/mq

## soak: the long crash and load runs (see README).
soak:
	$(GO) test -count=1 -tags soak -timeout 60m ./...
