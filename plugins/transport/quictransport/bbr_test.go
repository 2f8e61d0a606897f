package quictransport

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/binary"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/quivermq/quiver/plugins/transport/quictransport/internal/quic"
	"github.com/quivermq/quiver/plugins/transport/quictransport/internal/quic/qlog"
	"github.com/quivermq/quiver/plugins/transport/quictransport/internal/quic/qlogwriter"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// stateTrace keeps the congestion states a connection's qlog reports.
type stateTrace struct {
	mu     sync.Mutex
	states []string
}

func (s *stateTrace) AddProducer() qlogwriter.Recorder { return s }
func (s *stateTrace) Close() error                     { return nil }
func (s *stateTrace) RecordEvent(ev qlogwriter.Event) {
	if cs, ok := ev.(qlog.CongestionStateUpdated); ok {
		s.mu.Lock()
		s.states = append(s.states, string(cs.State))
		s.mu.Unlock()
	}
}

// TestBBREndToEnd: transport.quic.congestion "bbr" runs Quiver's BBR in
// quic-go's real connection over 127.0.0.1: 4 MB each way arrive intact,
// and the client's qlog shows BBR's states (Startup first), where Reno
// reports slow_start and congestion_avoidance.
func TestBBREndToEnd(t *testing.T) {
	scfg := testConfig()
	scfg.Congestion = "bbr"
	ln := listen(t, scfg, 0)
	ccfg := testConfig()
	ccfg.Congestion = "bbr"
	qcfg := quicConfig(ccfg)
	tr := &stateTrace{}
	qcfg.Tracer = func(context.Context, bool, quic.ConnectionID) qlogwriter.Trace { return tr }
	ctx := ctxFor(t, 2*time.Minute)
	qc, err := quic.DialAddr(ctx, ln.Addr(), &tls.Config{InsecureSkipVerify: true, NextProtos: []string{ALPN}}, qcfg)
	require.NoError(t, err)
	client := newConn(qc, ccfg, maxOr(0), slog.New(slog.DiscardHandler), func() {})
	t.Cleanup(func() { client.Close() })
	s, err := ln.Accept(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	server := s.(*Conn)

	const frames, size = 64, 64 << 10 // 4 MB each way
	for _, p := range [][2]*Conn{{client, server}, {server, client}} {
		done := make(chan error, 1)
		go func() {
			for i := range frames {
				if err := p[0].WriteFrame(ctx, frameOf(1, i, size)); err != nil {
					done <- err
					return
				}
			}
			done <- nil
		}()
		seen := make(map[int]bool)
		for range frames {
			got, err := p[1].ReadFrame(ctx)
			require.NoError(t, err)
			require.Len(t, got, size)
			seq := int(binary.BigEndian.Uint32(got[4:])) // frames travel on streams of their own: any order
			require.False(t, seen[seq], "frame %d twice", seq)
			seen[seq] = true
			require.True(t, bytes.Equal(frameOf(1, seq, size), got), "frame %d corrupted", seq)
		}
		require.NoError(t, <-done)
	}

	tr.mu.Lock()
	defer tr.mu.Unlock()
	t.Logf("states: %v", tr.states)
	require.NotEmpty(t, tr.states)
	assert.Equal(t, "Startup", tr.states[0], "states: %v", tr.states)
	assert.NotContains(t, tr.states, string(qlog.CongestionStateSlowStart), "Reno ran: %v", tr.states)
	// Whether BBR leaves Startup here depends on the machine: on a loaded
	// one (or under -race) the ends are too slow to fill loopback, the
	// sender is application- or flow-control-limited and, rightly, stays
	// in Startup. The state machine is tested in internal/quic/internal/congestion.
}
