package congestion

// QUIVER patch: this file is Quiver's, the seam that chooses the controller.

import (
	"fmt"
	"math/rand/v2"

	"github.com/quivermq/quiver/plugins/transport/quictransport/internal/quic/internal/protocol"
	"github.com/quivermq/quiver/plugins/transport/quictransport/internal/quic/internal/utils"
	"github.com/quivermq/quiver/plugins/transport/quictransport/internal/quic/qlogwriter"
)

// Algorithm names a congestion controller.
type Algorithm uint8

const (
	// AlgorithmReno is quic-go's NewReno (cubic_sender.go with reno set).
	AlgorithmReno Algorithm = iota
	// AlgorithmBBR is Quiver's BBR (bbr_sender.go).
	AlgorithmBBR
)

// ParseAlgorithm reads a controller's name as quic.Config.Congestion spells
// it: "" and "reno" are Reno, "bbr" is BBR.
func ParseAlgorithm(name string) (Algorithm, error) {
	switch name {
	case "", "reno":
		return AlgorithmReno, nil
	case "bbr":
		return AlgorithmBBR, nil
	default:
		return 0, fmt.Errorf("unknown congestion controller %q (want reno or bbr)", name)
	}
}

// Choice is the controller a connection's sent-packet handler creates, on
// its first path and again after a migration.
type Choice struct {
	Algorithm Algorithm
	// RenoBeta is Reno's multiplicative decrease; 0 is the default 0.7.
	RenoBeta float64
}

// New creates the chosen controller.
func New(
	c Choice,
	clock Clock,
	rttStats *utils.RTTStats,
	connStats *utils.ConnectionStats,
	initialMaxDatagramSize protocol.ByteCount,
	qlogger qlogwriter.Recorder,
) SendAlgorithmWithDebugInfos {
	if c.Algorithm == AlgorithmBBR {
		return newBBRSender(clock, rttStats, connStats, initialMaxDatagramSize, qlogger, rand.Uint64())
	}
	return NewCubicSender(clock, rttStats, connStats, initialMaxDatagramSize, true, qlogger, c.RenoBeta)
}
