package producer

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/quivermq/quiver/client"
)

// Request-reply (RocketMQ 4.6's RPC, Java's DefaultMQProducer.request):
// Request sends msg and waits for the reply a consumer sends with
// client.NewReply; the broker pushes that reply to this client. See
// client/reply.go.

// Request sends msg and returns its reply. It waits until ctx's deadline,
// or for the send timeout (WithSendTimeout) when ctx has none; it then
// fails with an error wrapping client.ErrTimeout. Request sets msg's
// CORRELATION_ID, REPLY_TO_CLIENT and TTL properties, as Java's does.
func (p *Producer) Request(ctx context.Context, msg *client.Message) (*client.MessageExt, error) {
	deadline, id, err := p.prepareRequest(ctx, msg)
	if err != nil {
		return nil, err
	}
	got := make(chan *client.MessageExt, 1)
	forget := p.c.ExpectReply(id, func(m *client.MessageExt) { got <- m })
	defer forget()
	if _, err := p.SendSync(ctx, msg); err != nil {
		return nil, fmt.Errorf("producer: request to %s: %w", msg.Topic, err)
	}
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	select {
	case m := <-got:
		return m, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("producer: request to %s: no reply: %w", msg.Topic, ctx.Err())
	case <-timer.C:
		return nil, fmt.Errorf("producer: request to %s sent, but no reply within its TTL %s ms: %w", msg.Topic, msg.Property(client.PropertyMessageTTL), client.ErrTimeout)
	}
}

// RequestAsync sends msg and calls cb once with its reply, or with the
// error: the send's, or one wrapping client.ErrTimeout when no reply
// came by ctx's deadline (or the send timeout). cb runs on a goroutine of
// its own. The error returned is about msg itself or a closed producer;
// cb is not called then. Shutdown waits for the requests in flight.
func (p *Producer) RequestAsync(ctx context.Context, msg *client.Message, cb func(context.Context, *client.MessageExt, error)) error {
	deadline, id, err := p.prepareRequest(ctx, msg)
	if err != nil {
		return err
	}
	if err := p.begin(); err != nil {
		return err
	}
	var (
		once   sync.Once
		forget func()
		timer  *time.Timer
		mu     sync.Mutex
	)
	finish := func(m *client.MessageExt, err error) {
		once.Do(func() {
			mu.Lock()
			forget()
			if timer != nil {
				timer.Stop()
			}
			mu.Unlock()
			go func() {
				defer p.wg.Done()
				cb(ctx, m, err)
			}()
		})
	}
	mu.Lock()
	forget = p.c.ExpectReply(id, func(m *client.MessageExt) { finish(m, nil) })
	timer = time.AfterFunc(time.Until(deadline), func() {
		finish(nil, fmt.Errorf("producer: request to %s sent, but no reply within its TTL %s ms: %w", msg.Topic, msg.Property(client.PropertyMessageTTL), client.ErrTimeout))
	})
	mu.Unlock()
	err = p.SendAsync(ctx, func(_ context.Context, _ *client.SendResult, err error) {
		if err != nil {
			finish(nil, fmt.Errorf("producer: request to %s: %w", msg.Topic, err))
		}
	}, msg)
	if err != nil {
		once.Do(func() {
			mu.Lock()
			forget()
			timer.Stop()
			mu.Unlock()
			p.wg.Done()
		})
		return err
	}
	return nil
}

// prepareRequest sets msg's request properties and, for a topic this
// client has no route of yet, fetches it and heartbeats to its brokers
// (the broker pushes the reply to the producer connections it knows from
// heartbeats), as Java's prepareSendRequest does; so does the first
// request of a producer, whose group may not have reached the brokers
// yet.
func (p *Producer) prepareRequest(ctx context.Context, msg *client.Message) (time.Time, string, error) {
	if msg == nil {
		return time.Time{}, "", errors.New("producer: request: no message")
	}
	if err := p.validate([]*client.Message{msg}); err != nil {
		return time.Time{}, "", err
	}
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(p.o.sendTimeout)
	}
	ttl := time.Until(deadline).Milliseconds()
	if ttl <= 0 {
		return time.Time{}, "", fmt.Errorf("producer: request to %s: %w", msg.Topic, client.ErrTimeout)
	}
	id := client.NewUniqID()
	msg.SetProperty(client.PropertyCorrelationID, id)
	msg.SetProperty(client.PropertyReplyToClient, p.c.ID())
	msg.SetProperty(client.PropertyMessageTTL, strconv.FormatInt(ttl, 10))
	if p.c.CachedPublishRoute(msg.Topic) == nil || !p.heartbeated.Load() {
		if _, err := p.publishRoute(ctx, msg.Topic, deadline); err != nil {
			return time.Time{}, "", fmt.Errorf("producer: request to %s: %w", msg.Topic, err)
		}
		if err := p.c.SendHeartbeat(ctx); err != nil {
			p.log.Debug("heartbeat before a request", "topic", msg.Topic, "err", err)
		} else {
			p.heartbeated.Store(true)
		}
	}
	return deadline, id, nil
}
