package quictransport

import (
	"context"
	"crypto/tls"
	"sync"
	"testing"
	"time"

	"github.com/quivermq/quiver/plugins/transport/quictransport/internal/quic"
	"github.com/quivermq/quiver/plugins/transport/quictransport/internal/quic/qlog"
	"github.com/quivermq/quiver/plugins/transport/quictransport/internal/quic/qlogwriter"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// paramsTrace keeps the transport parameters a connection's qlog reports:
// its own (local) and the peer's (remote).
type paramsTrace struct {
	mu     sync.Mutex
	params map[qlog.Initiator]qlog.ParametersSet
}

func (p *paramsTrace) AddProducer() qlogwriter.Recorder { return p }
func (p *paramsTrace) Close() error                     { return nil }
func (p *paramsTrace) RecordEvent(ev qlogwriter.Event) {
	if ps, ok := ev.(qlog.ParametersSet); ok {
		p.mu.Lock()
		p.params[ps.Initiator] = ps
		p.mu.Unlock()
	}
}

// TestMaxAckDelayAdvertised: transport.quic.max_ack_delay (patched quic-go,
// internal/quic) is advertised as the max_ack_delay transport
// parameter, plus quic-go's 1 ms timer granularity rounded up to whole
// milliseconds; 0 keeps quic-go's 25 ms (advertised 26 ms). The client
// here is a bare quic-go with the config quicConfig builds, so both
// directions are checked: what the client sends and what the server (a
// quictransport Listener) sends.
func TestMaxAckDelayAdvertised(t *testing.T) {
	for _, tt := range []struct {
		name                     string
		client, server           time.Duration
		wantClient, wantFromPeer time.Duration
	}{
		{"default 1ms both", time.Millisecond, time.Millisecond, 2 * time.Millisecond, 2 * time.Millisecond},
		{"quic-go's 25ms server", time.Millisecond, 0, 2 * time.Millisecond, 26 * time.Millisecond},
		{"sub-millisecond rounds up", 2500 * time.Microsecond, 300 * time.Microsecond, 4 * time.Millisecond, 2 * time.Millisecond},
	} {
		t.Run(tt.name, func(t *testing.T) {
			scfg := testConfig()
			scfg.MaxAckDelay = tt.server
			ln := listen(t, scfg, 0)
			ccfg := testConfig()
			ccfg.MaxAckDelay = tt.client
			qcfg := quicConfig(ccfg)
			tr := &paramsTrace{params: map[qlog.Initiator]qlog.ParametersSet{}}
			qcfg.Tracer = func(_ context.Context, _ bool, _ quic.ConnectionID) qlogwriter.Trace { return tr }
			ctx := ctxFor(t, 10*time.Second)
			qc, err := quic.DialAddr(ctx, ln.Addr(), &tls.Config{InsecureSkipVerify: true, NextProtos: []string{ALPN}}, qcfg)
			require.NoError(t, err)
			c, err := ln.Accept(ctx)
			require.NoError(t, err)
			t.Cleanup(func() { c.Close() })
			t.Cleanup(func() { qc.CloseWithError(0, "") })

			tr.mu.Lock()
			defer tr.mu.Unlock()
			require.Contains(t, tr.params, qlog.InitiatorLocal)
			require.Contains(t, tr.params, qlog.InitiatorRemote)
			assert.Equal(t, tt.wantClient, tr.params[qlog.InitiatorLocal].MaxAckDelay, "sent by the client")
			assert.Equal(t, tt.wantFromPeer, tr.params[qlog.InitiatorRemote].MaxAckDelay, "sent by the server")
		})
	}
}
