// Package client is the shared core of Quiver's Go client library: it
// resolves name servers, caches topic routes, keeps one connection per
// remote address, sends heartbeats for the producers and consumers that
// share it, and dispatches the requests brokers send back (transaction
// checks, consumer-ids-changed, offset resets).
//
// Producers, consumers and the admin API live in the subpackages
// client/producer, client/consumer and client/admin; each takes a *Client.
// The client speaks RocketMQ 4.x remoting exactly as the official Go client
// (github.com/apache/rocketmq-client-go/v2) does, so a broker cannot tell
// them apart.
//
// The transport is chosen by the name-server address scheme: "tcp://h:p",
// "quic://h:p", or a plain "h:p" for TCP. The client does not link any
// transport itself: pass a dialer with WithDialer, for example the one from
// client/transports. Brokers learned from a name server are dialled with
// that name server's scheme.
//
// Methods documented as low-level (Invoke, Route, RegisterProducer, ...)
// are the seam the subpackages build on; applications rarely need them.
package client
