// Package crossarch holds the test that runs the broker of every release
// architecture, not only builds it: TestBrokerUnderEmulation cross-builds
// cmd/mq as a static binary for each linux target of
// docs/guide/edge.md, runs `mq broker --config config.edge.yaml` under
// qemu-user (amd64 natively) with the commit-log and Pebble engines, and
// drives it with Quiver's client from the host over 127.0.0.1: a
// producer over TCP, a consumer over QUIC, every message checked
// consumed, the broker alive and answering afterwards and stopping
// cleanly. On MIPS, where Pebble cannot run, it checks that the edge
// profile's engine runs and that Pebble is refused at start with its
// reason instead.
//
// `make crossarch` (part of `make test`) runs a short subset; `make soak`
// runs every target with a longer load. The package has no non-test code.
package crossarch
