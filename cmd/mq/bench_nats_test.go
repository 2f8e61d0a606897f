package main

import (
	"context"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/internal/testserver"
)

// TestBenchProduceOverNATS: with --nats-url, a nats:// name server makes mq
// bench reach name server and broker through a NATS server.
func TestBenchProduceOverNATS(t *testing.T) {
	ns, err := natsserver.NewServer(&natsserver.Options{Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true})
	require.NoError(t, err)
	go ns.Start()
	t.Cleanup(ns.Shutdown)
	require.True(t, ns.ReadyForConnections(10*time.Second))
	url := ns.ClientURL()
	srv := testserver.StartDev(t, testserver.Options{Sets: []string{"transports=tcp,nats", "transport.nats.url=" + url}})
	benchNATSURL = url
	t.Cleanup(func() { benchNATSURL = "" })
	r, err := benchProduce(context.Background(), &produceFlags{
		namesrv: "nats://" + srv.Namesrv, topic: "BenchNATS", size: 256, concurrency: 2,
		count: 200, duration: 30 * time.Second, mode: "sync",
	})
	require.NoError(t, err)
	assert.Equal(t, int64(200), r.Messages)
	assert.Zero(t, r.Errors)
}
