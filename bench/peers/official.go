package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
	"github.com/apache/rocketmq-client-go/v2/rlog"
)

// quietOfficialClient turns the official client's logging down: it logs
// every rebalance and connection at info.
func quietOfficialClient() { rlog.SetLogLevel("error") }

// officialTarget is the same `mq dev` as quiverTarget, driven by the
// official github.com/apache/rocketmq-client-go/v2 (issue 24): one
// request per message, one response per message. Topics are made with
// Quiver's admin client (the official one's admin API needs a cluster
// name and brings nothing to the measurement).
type officialTarget struct {
	*quiverTarget
	// batch is the push consumer's ConsumeMessageBatchMaxSize (0: the
	// client's default, 1).
	batch int
}

func (o *officialTarget) name() string { return "Quiver" }

func (o *officialTarget) label() string {
	if o.batch > 0 {
		return fmt.Sprintf("Quiver/official(batch %d)", o.batch)
	}
	return "Quiver/official"
}

type officialSender struct {
	p     rocketmq.Producer
	topic string
}

func (o *officialTarget) newSender(ctx context.Context, topic string, i int) (sender, error) {
	n := o.seq.Add(1)
	p, err := rocketmq.NewProducer(
		producer.WithNameServer([]string{o.namesrv}),
		producer.WithGroupName(fmt.Sprintf("PeersOfficialProducer%d", n)),
		producer.WithInstanceName(fmt.Sprintf("peers-official-prod-%d", n)),
		producer.WithSendMsgTimeout(10*time.Second),
		producer.WithRetry(2),
		// Bodies are incompressible or zeroes; either way the zlib pass
		// over bodies above 4 KiB measures the client, not the broker.
		producer.WithCompressMsgBodyOverHowmuch(1<<30),
	)
	if err != nil {
		return nil, err
	}
	if err := p.Start(); err != nil {
		return nil, err
	}
	return &officialSender{p: p, topic: topic}, nil
}

func (s *officialSender) send(ctx context.Context, body []byte) error {
	r, err := s.p.SendSync(ctx, primitive.NewMessage(s.topic, body))
	if err == nil && r.Status != primitive.SendOK {
		err = fmt.Errorf("official: send status %d", r.Status)
	}
	return err
}

func (s *officialSender) sendAsync(ctx context.Context, body []byte, done func(error)) error {
	return s.p.SendAsync(ctx, func(_ context.Context, r *primitive.SendResult, err error) {
		if err == nil && r != nil && r.Status != primitive.SendOK {
			err = fmt.Errorf("official: send status %d", r.Status)
		}
		done(err)
	}, primitive.NewMessage(s.topic, body))
}

func (s *officialSender) close() { s.p.Shutdown() }

// consume runs consumers push consumers (clustering, from the first
// offset, the client's defaults otherwise; ConsumeMessageBatchMaxSize
// when batch is set) of a new group.
func (o *officialTarget) consume(ctx context.Context, topic, group string, consumers int, fn func([]byte)) (func(), error) {
	group = fmt.Sprintf("PeersOfficial_%s_%d", group, o.seq.Add(1))
	var mu sync.Mutex
	var cs []rocketmq.PushConsumer
	stop := func() {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range cs {
			c.Shutdown()
		}
		cs = nil
	}
	for i := 0; i < consumers; i++ {
		opts := []consumer.Option{
			consumer.WithNameServer([]string{o.namesrv}),
			consumer.WithGroupName(group),
			consumer.WithInstance(fmt.Sprintf("peers-official-cons-%d", o.seq.Add(1))),
			consumer.WithConsumerModel(consumer.Clustering),
			consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset),
		}
		if o.batch > 0 {
			opts = append(opts, consumer.WithConsumeMessageBatchMaxSize(o.batch))
		}
		c, err := rocketmq.NewPushConsumer(opts...)
		if err != nil {
			stop()
			return nil, err
		}
		if err := c.Subscribe(topic, consumer.MessageSelector{Type: consumer.TAG, Expression: "*"},
			func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
				for _, m := range msgs {
					fn(m.Body)
				}
				return consumer.ConsumeSuccess, nil
			}); err != nil {
			c.Shutdown()
			stop()
			return nil, err
		}
		if err := c.Start(); err != nil {
			c.Shutdown()
			stop()
			return nil, err
		}
		mu.Lock()
		cs = append(cs, c)
		mu.Unlock()
	}
	return stop, nil
}
