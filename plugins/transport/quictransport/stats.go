package quictransport

import "github.com/quivermq/quiver/plugins/transport/quictransport/internal/quic"

// Stats returns quic-go's counters of the connection: packets and bytes
// sent, received and declared lost, and the RTT estimates. PacketsLost
// counts our packets the peer never acknowledged, whether the link
// dropped them or the peer's receive path did (a full socket buffer or
// quic-go's queue of unprocessed packets, when the peer is short of CPU).
// AckOnlyPacketsSent and ProbePacketsSent (PTO probes, sent when an ACK is
// late or a packet lost) are the patched quic-go's.
func (c *Conn) Stats() quic.ConnectionStats { return c.qc.ConnectionStats() }
