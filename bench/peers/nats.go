package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// natsTarget is nats-server with JetStream (file storage) in a child
// process, driven by nats.go's jetstream API.
type natsTarget struct {
	p   *proc
	url string
	nc  *nats.Conn
	js  jetstream.JetStream
	seq atomic.Int64
}

func startNATS(ctx context.Context, bin, dir string, syncAlways bool) (*natsTarget, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	sync := "" // default: fsync every 2 minutes
	if syncAlways {
		sync = "  sync_interval: always\n"
	}
	conf := fmt.Sprintf("listen: \"127.0.0.1:%d\"\nmax_payload: 8MB\njetstream {\n  store_dir: %q\n  max_memory_store: 256MB\n  max_file_store: 64GB\n%s}\n",
		port, filepath.Join(dir, "js"), sync)
	cf := filepath.Join(dir, "nats.conf")
	if err := os.WriteFile(cf, []byte(conf), 0o644); err != nil {
		return nil, err
	}
	p, err := startProc("nats-server", dir, bin, "-c", cf)
	if err != nil {
		return nil, err
	}
	t := &natsTarget{p: p, url: fmt.Sprintf("nats://127.0.0.1:%d", port)}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	if err := waitTCP(ctx, p, addr, 30*time.Second); err != nil {
		p.stop()
		return nil, err
	}
	if t.nc, err = nats.Connect(t.url); err != nil {
		p.stop()
		return nil, err
	}
	if t.js, err = jetstream.New(t.nc); err != nil {
		t.close()
		return nil, err
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := t.js.AccountInfo(ctx)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.close()
			return nil, fmt.Errorf("peers: jetstream not ready: %v\n%s", err, p.logs.tail(30))
		}
		time.Sleep(100 * time.Millisecond)
	}
	return t, nil
}

func (t *natsTarget) name() string { return "JetStream" }

func (t *natsTarget) serverCPU() time.Duration { return t.p.cpu() }

func (t *natsTarget) newTopic(ctx context.Context, tag string) (string, error) {
	name := fmt.Sprintf("PEERS_%s_%d", tag, t.seq.Add(1))
	_, err := t.js.CreateStream(ctx, jetstream.StreamConfig{
		Name: name, Subjects: []string{name}, Storage: jetstream.FileStorage, Replicas: 1,
		Retention: jetstream.LimitsPolicy, Discard: jetstream.DiscardOld,
	})
	return name, err
}

func (t *natsTarget) dropTopic(ctx context.Context, topic string) { t.js.DeleteStream(ctx, topic) }

type natsSender struct {
	nc      *nats.Conn
	js      jetstream.JetStream
	subject string
}

func (t *natsTarget) newSender(ctx context.Context, topic string, i int) (sender, error) {
	nc, err := nats.Connect(t.url)
	if err != nil {
		return nil, err
	}
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(4096))
	if err != nil {
		nc.Close()
		return nil, err
	}
	return &natsSender{nc: nc, js: js, subject: topic}, nil
}

func (s *natsSender) send(ctx context.Context, body []byte) error {
	_, err := s.js.Publish(ctx, s.subject, body)
	return err
}

func (s *natsSender) sendAsync(ctx context.Context, body []byte, done func(error)) error {
	f, err := s.js.PublishAsync(s.subject, body)
	if err != nil {
		return err
	}
	go func() {
		select {
		case <-f.Ok():
			done(nil)
		case err := <-f.Err():
			done(err)
		}
	}()
	return nil
}

func (s *natsSender) close() { s.nc.Close() }

// consume creates the durable pull consumer group (AckNone: no per
// message acknowledgement, like a Quiver pull) and runs consumers
// connections on it with Consume (pipelined pull requests).
func (t *natsTarget) consume(ctx context.Context, topic, group string, consumers int, fn func([]byte)) (func(), error) {
	durable := fmt.Sprintf("%s_%d", group, t.seq.Add(1))
	if _, err := t.js.CreateOrUpdateConsumer(ctx, topic, jetstream.ConsumerConfig{
		Durable: durable, AckPolicy: jetstream.AckNonePolicy, DeliverPolicy: jetstream.DeliverAllPolicy,
	}); err != nil {
		return nil, err
	}
	var mu sync.Mutex
	var conns []*nats.Conn
	var ccs []jetstream.ConsumeContext
	stop := func() {
		mu.Lock()
		defer mu.Unlock()
		for _, cc := range ccs {
			cc.Stop()
		}
		for _, nc := range conns {
			nc.Close()
		}
	}
	for i := 0; i < consumers; i++ {
		nc, err := nats.Connect(t.url)
		if err != nil {
			stop()
			return nil, err
		}
		conns = append(conns, nc)
		js, err := jetstream.New(nc)
		if err != nil {
			stop()
			return nil, err
		}
		c, err := js.Consumer(ctx, topic, durable)
		if err != nil {
			stop()
			return nil, err
		}
		cc, err := c.Consume(func(m jetstream.Msg) { fn(m.Data()) }, jetstream.PullMaxMessages(1000))
		if err != nil {
			stop()
			return nil, err
		}
		ccs = append(ccs, cc)
	}
	return stop, nil
}

func (t *natsTarget) close() {
	if t.nc != nil {
		t.nc.Close()
	}
	t.p.stop()
}

func (t *natsTarget) serverSyscalls() int64 { return t.p.syscalls() }
