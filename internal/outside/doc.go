// Package outside builds Quiver the way its users do: from a module of
// its own (example.com/quiver-outside, go.mod here) that requires
// github.com/quivermq/quiver with a replace of Quiver alone, as a local
// trial of an unreleased checkout does. Go ignores the replace
// directives of dependencies, so anything Quiver's own go.mod patches
// with a replace is invisible here, exactly as for a user; and the
// module path is foreign, so nothing here may import Quiver's internal/
// packages either.
//
// It holds what users build:
//   - cmd/quicapp, an application that sends and receives over quic://
//     with Quiver's client (client/README.md's first example, over QUIC);
//   - suffixfilter, an out-of-tree filter plugin (expression type SUFFIX);
//   - cmd/outsidemq, a server binary with the stock name server, broker,
//     transports and storage plus suffixfilter.
//
// outside_test.go builds both binaries with go build, starts outsidemq
// dev with QUIC on, runs quicapp against it and subscribes with SUFFIX.
// make test runs it (cd internal/outside && go test ./...).
package outside
