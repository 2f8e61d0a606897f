package client

import (
	"context"
	"log/slog"
	"time"

	"github.com/quivermq/quiver/core/transport"
)

// DialFunc opens a frame connection. addr carries the scheme ("tcp://",
// "quic://") when it is not TCP; see core/transport.Set.Dial.
type DialFunc func(ctx context.Context, addr string) (transport.Conn, error)

// Option configures a Client.
type Option func(*options)

type options struct {
	nameServers     []string
	dial            DialFunc
	log             *slog.Logger
	instance        string
	accessKey       string
	secretKey       string
	securityToken   string
	strictSign      bool // sign_strict.go
	heartbeat       time.Duration
	routeRefresh    time.Duration
	requestTimeout  time.Duration
	namesrvTimeout  time.Duration
	maxInFlight     int
	firstHeartbeat  time.Duration
	firstRouteFetch time.Duration
}

func defaultOptions() options {
	return options{
		heartbeat:       30 * time.Second,
		routeRefresh:    30 * time.Second,
		requestTimeout:  3 * time.Second,
		namesrvTimeout:  6 * time.Second,
		firstHeartbeat:  time.Second,
		firstRouteFetch: 10 * time.Millisecond,
	}
}

// WithNameServers sets the name-server addresses: "tcp://ip:port",
// "quic://ip:port" or "ip:port" (TCP). Brokers are dialled with the scheme
// of the first address.
func WithNameServers(addrs ...string) Option {
	return func(o *options) { o.nameServers = append([]string(nil), addrs...) }
}

// WithDialer sets how connections are opened; required. See
// client/transports for a ready-made TCP+QUIC dialer.
func WithDialer(d DialFunc) Option { return func(o *options) { o.dial = d } }

// WithLogger sets the logger (default: discard).
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.log = l } }

// WithInstanceName sets the instance part of the client id
// "<ip>@<instance>". Default: the process id, with "#n" appended for the
// second and later clients of a process, so each Client is its own group
// member.
func WithInstanceName(name string) Option { return func(o *options) { o.instance = name } }

// WithCredentials enables RocketMQ ACL 1.0 signing of every request, as
// the official Go client does (the security token is sent but not signed).
func WithCredentials(accessKey, secretKey, securityToken string) Option {
	return func(o *options) { o.accessKey, o.secretKey, o.securityToken = accessKey, secretKey, securityToken }
}

// WithStrictSignatures signs every request with Quiver's strict signature
// instead of ACL 1.0's: it also covers the request code, a timestamp and
// a nonce, so a captured request can be neither replayed nor re-sent under
// another code (auth.acl.strict_signatures on the server; docs/SECURITY.md).
// Only Quiver servers accept it. Needs WithCredentials.
func WithStrictSignatures() Option { return func(o *options) { o.strictSign = true } }

// WithHeartbeatInterval sets the broker heartbeat period (default 30 s).
func WithHeartbeatInterval(d time.Duration) Option { return func(o *options) { o.heartbeat = d } }

// WithRouteRefreshInterval sets the route refresh period (default 30 s).
func WithRouteRefreshInterval(d time.Duration) Option {
	return func(o *options) { o.routeRefresh = d }
}

// WithRequestTimeout bounds small broker requests made on behalf of
// callers that pass a context without deadline (default 3 s).
func WithRequestTimeout(d time.Duration) Option { return func(o *options) { o.requestTimeout = d } }

// WithMaxInFlight bounds server-initiated requests handled at once per
// connection (default 1024).
func WithMaxInFlight(n int) Option { return func(o *options) { o.maxInFlight = n } }
