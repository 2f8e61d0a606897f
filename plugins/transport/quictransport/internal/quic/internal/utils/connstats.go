package utils

import "sync/atomic"

// ConnectionStats stores stats for the connection. See the public
// ConnectionStats struct in connection.go for more information
type ConnectionStats struct {
	CongestionWindow atomic.Uint64

	BytesSent       atomic.Uint64
	PacketsSent     atomic.Uint64
	BytesReceived   atomic.Uint64
	PacketsReceived atomic.Uint64
	BytesLost       atomic.Uint64
	PacketsLost     atomic.Uint64

	// QUIVER patch: packets sent that elicit no ACK (ACK-only, mostly).
	AckOnlyPacketsSent atomic.Uint64
	// QUIVER patch: PTO probe packets sent (ack-eliciting packets sent while
	// the loss-detection timer's probes were owed).
	ProbePacketsSent atomic.Uint64
}
