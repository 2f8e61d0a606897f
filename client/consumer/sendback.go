package consumer

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/quivermq/quiver/client"
	"github.com/quivermq/quiver/core/message"
	"github.com/quivermq/quiver/core/protocol"
	"github.com/quivermq/quiver/core/remoting"
)

// Send-back: messages a clustering consumer failed to consume go back to
// the broker for redelivery through the group's retry topic; those that
// cannot be sent back are retried locally.

// sendBackBatch sends the messages of a failed task back to the broker
// and returns those it sent back (done with here). The others stay in
// the process queue and are dispatched again, with ReconsumeTimes one
// more, after localRetryInterval.
func (pc *PushConsumer) sendBackBatch(t consumeTask) []*client.MessageExt {
	var failed []*client.MessageExt
	for _, m := range t.msgs {
		if err := pc.sendBack(pc.ctx, m, pc.o.retryDelayLevel); err != nil {
			pc.log.Warn("send back failed; retrying locally", "msgId", m.MsgID, "err", err)
			failed = append(failed, m)
		}
	}
	if len(failed) == 0 {
		return t.msgs
	}
	done := t.msgs[:0:0]
	for _, m := range t.msgs {
		if !contains(failed, m) {
			done = append(done, m)
		}
	}
	pc.wg.Add(1)
	go func() {
		defer pc.wg.Done()
		if !pc.sleep(pc.o.localRetryInterval, t.pq.stop) {
			return
		}
		for _, m := range failed {
			m.ReconsumeTimes++
		}
		pc.dispatch(t.pq, failed)
	}()
	return done
}

func contains(ms []*client.MessageExt, m *client.MessageExt) bool {
	for _, x := range ms {
		if x == m {
			return true
		}
	}
	return false
}

func (pc *PushConsumer) maxReconsume() int {
	if pc.o.maxReconsume < 0 {
		return 16
	}
	return pc.o.maxReconsume
}

// sendBack returns a message to the broker for redelivery through the
// group's retry topic (CONSUMER_SEND_MSG_BACK), falling back to sending it
// to %RETRY%<group> as a normal message, as the official client does.
func (pc *PushConsumer) sendBack(ctx context.Context, m *client.MessageExt, delayLevel int) error {
	// Also during shutdown: a handler that just said "retry later" still
	// gets its message sent back.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 3*time.Second)
	defer cancel()
	addr, err := brokerOf(ctx, pc.c, m.Queue)
	if err == nil {
		req := client.NewRequest(remoting.ConsumerSendMsgBack, map[string]string{
			"group": pc.group, "offset": strconv.FormatInt(m.CommitLogOffset, 10),
			"delayLevel": strconv.Itoa(delayLevel), "originMsgId": m.MsgID, "originTopic": m.Topic,
			"unitMode": "false", "maxReconsumeTimes": strconv.Itoa(pc.maxReconsume()), "bname": m.Queue.BrokerName,
		}, nil)
		var resp *remoting.Command
		resp, err = pc.c.Invoke(ctx, addr, req)
		if err == nil && resp.Code == remoting.Success {
			return nil
		}
		if err == nil {
			err = client.NewBrokerError(addr, resp)
		}
	}
	pc.log.Debug("send back failed; sending to the retry topic", "msgId", m.MsgID, "err", err)
	if err2 := pc.sendToRetryTopic(ctx, m); err2 != nil {
		return fmt.Errorf("consumer: send back %s: %w (retry topic: %w)", m.MsgID, err, err2)
	}
	return nil
}

func (pc *PushConsumer) sendToRetryTopic(ctx context.Context, m *client.MessageExt) error {
	topic := protocol.RetryTopic(pc.group)
	route, err := pc.c.PublishRoute(ctx, topic, 1)
	if err != nil {
		return err
	}
	q := route.Publish[rand.IntN(len(route.Publish))]
	addr, ok := pc.c.BrokerAddr(q.BrokerName)
	if !ok {
		return client.ErrBrokerNotFound
	}
	props := message.Properties(m.Properties).Clone()
	if props[message.PropertyOriginMessageID] == "" {
		props[message.PropertyOriginMessageID] = m.MsgID
	}
	props[message.PropertyRetryTopic] = m.Topic
	props[message.PropertyDelayTimeLevel] = strconv.Itoa(3 + int(m.ReconsumeTimes))
	delete(props, message.PropertyTransactionPrepared)
	delete(props, message.PropertyMinOffset)
	delete(props, message.PropertyMaxOffset)
	delete(props, message.PropertyConsumeStartTime)
	b := props.AppendEncoded(nil)
	if len(b) > 0 {
		b = append(b, message.PropertySeparator)
	}
	req := client.NewRequest(remoting.SendMessage, map[string]string{
		"producerGroup": "CLIENT_INNER_PRODUCER", "topic": topic, "defaultTopic": protocol.AutoCreateTopic,
		"defaultTopicQueueNums": "4", "queueId": strconv.Itoa(q.QueueID), "sysFlag": "0",
		"bornTimestamp": strconv.FormatInt(time.Now().UnixMilli(), 10), "flag": strconv.Itoa(int(m.Flag)),
		"properties": string(b), "reconsumeTimes": strconv.Itoa(int(m.ReconsumeTimes) + 1), "unitMode": "false",
		"maxReconsumeTimes": strconv.Itoa(pc.maxReconsume()), "batch": "false", "bname": q.BrokerName,
	}, m.Body)
	resp, err := pc.c.Invoke(ctx, addr, req)
	if err != nil {
		return err
	}
	if resp.Code != remoting.Success {
		return client.NewBrokerError(addr, resp)
	}
	return nil
}
