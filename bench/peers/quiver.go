package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quivermq/quiver/client"
	"github.com/quivermq/quiver/client/admin"
	"github.com/quivermq/quiver/client/consumer"
	"github.com/quivermq/quiver/client/producer"
	"github.com/quivermq/quiver/client/transports"
)

const quiverQueues = 8

// quiverPullBatch is what each pull asks for: as many as the broker gives
// (broker.pull_batch_max, bounded by pull_bytes_max), like the 1,000 the
// JetStream consumer asks for.
const quiverPullBatch = 1024

// quiverTarget is `mq dev` in a child process, driven by Quiver's own
// client library (client/producer, client/consumer).
type quiverTarget struct {
	p       *proc
	namesrv string
	// grpcAddr is mq dev's gRPC endpoint (grpc.listen), for 5.x clients.
	grpcAddr string
	admin    *client.Client
	seq      atomic.Int64
	// trace is set when mq records its end-to-end timeline (-e2etrace).
	trace *tracer
}

func startQuiver(ctx context.Context, mq, dir string, syncFlush bool, pprofAddr string) (*quiverTarget, error) {
	return startQuiverTraced(ctx, mq, dir, syncFlush, pprofAddr, nil)
}

// startQuiverTraced is startQuiver; with tr, mq (built with -tags
// e2etrace) records its timeline and writes its dumps and stderr where tr
// says.
func startQuiverTraced(ctx context.Context, mq, dir string, syncFlush bool, pprofAddr string, tr *tracer) (*quiverTarget, error) {
	np, err := freePort()
	if err != nil {
		return nil, err
	}
	bp, err := freePort()
	if err != nil {
		return nil, err
	}
	gp, err := freePort() // the gRPC endpoint (5.x clients, grpc.go)
	if err != nil {
		return nil, err
	}
	flush := "async"
	if syncFlush {
		flush = "sync"
	}
	ns := fmt.Sprintf("127.0.0.1:%d", np)
	args := []string{"dev",
		"--set", "namesrv.listen=" + ns,
		"--set", fmt.Sprintf("broker.listen=127.0.0.1:%d", bp),
		"--set", fmt.Sprintf("grpc.listen=127.0.0.1:%d", gp),
		"--set", "storage.dir=" + filepath.Join(dir, "store"),
		"--set", "storage.flush=" + flush,
		"--set", "log.level=warn",
	}
	if pprofAddr != "" {
		args = append(args, "--pprof", pprofAddr)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var env []string
	var stderr *os.File
	if tr != nil {
		env = tr.env()
		if stderr, err = os.Create(tr.stderr); err != nil {
			return nil, err
		}
	}
	p, err := startProcEnv("mq dev", dir, mq, env, stderrOrNil(stderr), args...)
	if err != nil {
		if stderr != nil {
			stderr.Close()
		}
		return nil, err
	}
	q := &quiverTarget{p: p, namesrv: ns, grpcAddr: fmt.Sprintf("127.0.0.1:%d", gp), trace: tr}
	if err := waitTCP(ctx, p, ns, 30*time.Second); err != nil {
		p.stop()
		return nil, err
	}
	if err := waitTCP(ctx, p, fmt.Sprintf("127.0.0.1:%d", bp), 30*time.Second); err != nil {
		p.stop()
		return nil, err
	}
	if q.admin, err = q.newClient("admin"); err != nil {
		p.stop()
		return nil, err
	}
	// ready once a topic can be created and routed
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := q.newTopic(ctx, "ready")
		if err == nil {
			break
		}
		if time.Now().After(deadline) || p.exited() {
			q.close()
			return nil, fmt.Errorf("peers: quiver not ready: %v\n%s", err, p.logs.tail(30))
		}
		time.Sleep(100 * time.Millisecond)
	}
	return q, nil
}

// stderrOrNil keeps a nil *os.File from becoming a non-nil io.WriteCloser.
func stderrOrNil(f *os.File) io.WriteCloser {
	if f == nil {
		return nil
	}
	return f
}

func (q *quiverTarget) name() string { return "Quiver" }

func (q *quiverTarget) serverCPU() time.Duration { return q.p.cpu() }

func (q *quiverTarget) newClient(inst string) (*client.Client, error) {
	return client.New(client.WithNameServers(q.namesrv), transports.WithDialer(),
		client.WithInstanceName(fmt.Sprintf("%s-%d", inst, q.seq.Add(1))),
		client.WithLogger(discardLogger()))
}

func (q *quiverTarget) newTopic(ctx context.Context, tag string) (string, error) {
	topic := fmt.Sprintf("Peers_%s_%d_%d", tag, time.Now().UnixNano()%1e9, q.seq.Add(1))
	a := admin.New(q.admin)
	if err := a.CreateTopic(ctx, admin.TopicConfig{Topic: topic, ReadQueueNums: quiverQueues, WriteQueueNums: quiverQueues}); err != nil {
		return "", err
	}
	// wait until the name server routes it
	deadline := time.Now().Add(10 * time.Second)
	for {
		q.admin.ForgetRoute(topic)
		r, err := q.admin.FetchRoute(ctx, topic)
		if err == nil && r != nil && !r.Borrowed && len(r.Subscribe) >= quiverQueues {
			return topic, nil
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("quiver: topic %s not routed: %v", topic, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (q *quiverTarget) dropTopic(ctx context.Context, topic string) {
	admin.New(q.admin).DeleteTopic(ctx, topic)
}

type quiverSender struct {
	c     *client.Client
	p     *producer.Producer
	topic string
}

func (q *quiverTarget) newSender(ctx context.Context, topic string, i int) (sender, error) {
	c, err := q.newClient("prod")
	if err != nil {
		return nil, err
	}
	// No body compression: the big-body rows send random bytes, where a
	// zlib pass costs the client milliseconds and gains nothing (the
	// official client's is off too; 1 KiB bodies are below the threshold
	// anyway).
	p, err := producer.New(c, fmt.Sprintf("PeersProducer%d", q.seq.Add(1)), producer.WithCompression(0, 0))
	if err != nil {
		c.Close()
		return nil, err
	}
	return &quiverSender{c: c, p: p, topic: topic}, nil
}

// Messages carry no properties map (the producer adds UNIQ_KEY to the
// encoding, not to the map).
func (s *quiverSender) send(ctx context.Context, body []byte) error {
	_, err := s.p.SendSync(ctx, &client.Message{Topic: s.topic, Body: body})
	return err
}

func (s *quiverSender) sendAsync(ctx context.Context, body []byte, done func(error)) error {
	return s.p.SendAsync(ctx, func(_ context.Context, _ *client.SendResult, err error) { done(err) }, &client.Message{Topic: s.topic, Body: body})
}

func (s *quiverSender) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s.p.Shutdown(ctx)
	s.c.Close()
}

// consume runs consumers pull consumers of group; consumer i pulls the
// queues i, i+consumers, ... from offset 0, one long-polling goroutine per
// queue (what the push consumer does, without its rebalance delay), with
// PullEach (fn keeps nothing of a body).
func (q *quiverTarget) consume(ctx context.Context, topic, group string, consumers int, fn func([]byte)) (func(), error) {
	cctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var clients []*client.Client
	stop := func() {
		cancel()
		wg.Wait()
		for _, c := range clients {
			c.Close()
		}
	}
	group = fmt.Sprintf("PeersGroup_%s_%d", group, q.seq.Add(1))
	for i := 0; i < consumers; i++ {
		c, err := q.newClient("cons")
		if err != nil {
			stop()
			return nil, err
		}
		clients = append(clients, c)
		pc, err := consumer.NewPull(c, group)
		if err != nil {
			stop()
			return nil, err
		}
		qs, err := pc.Queues(ctx, topic)
		if err != nil {
			stop()
			return nil, err
		}
		for j, mq := range qs {
			if j%consumers != i {
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				var off int64
				for cctx.Err() == nil {
					pctx, pcancel := context.WithTimeout(cctx, 5*time.Second)
					// fn keeps nothing of a body: PullEach reuses the memory.
					r, err := pc.PullEach(pctx, mq, consumer.All(), off, quiverPullBatch, func(m *client.MessageExt) { fn(m.Body) })
					pcancel()
					if err != nil {
						if cctx.Err() == nil {
							time.Sleep(10 * time.Millisecond)
						}
						continue
					}
					if r.NextBeginOffset > off {
						off = r.NextBeginOffset
					}
				}
			}()
		}
	}
	return stop, nil
}

func (q *quiverTarget) close() {
	if q.admin != nil {
		q.admin.Close()
	}
	q.p.stop()
}

func (q *quiverTarget) serverSyscalls() int64 { return q.p.syscalls() }
