// Package powerloss holds the power-loss tests (no code of its own): the
// storage engines, their metadata documents and the broker's files run on
// internal/crashfs, which forgets on a crash whatever was not made durable
// the POSIX way, and what comes back is checked — every message
// acknowledged under storage.flush=sync is there, nothing served is
// corrupt, every metadata document is whole and at least as new as the
// last acknowledged save.
//
// `make test` runs a few rounds per engine and flush mode (-short);
// `make soak` runs many (docs/lab/BENCHMARKS.md has the counts).
package powerloss
