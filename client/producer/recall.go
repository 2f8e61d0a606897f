package producer

import (
	"context"
	"fmt"
	"strings"

	"github.com/quivermq/quiver/client"
	"github.com/quivermq/quiver/core/protocol"
	"github.com/quivermq/quiver/core/remoting"
)

// Recall takes back a timer message before its delivery time, by the
// recall handle its send was answered with (SendResult.RecallHandle),
// and returns the message's id (its UNIQ_KEY, the SendResult's MsgID).
// It is RocketMQ 5.3's DefaultMQProducer.recallMessage: RECALL_MESSAGE to
// the master of the broker the handle names, or, when no address of it
// is known, to a broker of the topic's route.
//
// The broker refuses a handle of another topic or broker, one whose time
// has passed or is beyond its maximum delay, and (Quiver) one that names
// no held message, with ILLEGAL_OPERATION: an error wrapping a
// *client.BrokerError (client.CodeOf gives the code). Recalling a
// recalled message again succeeds. The call is not retried; the send
// timeout bounds it. A handle that is not RocketMQ's v1 format is
// client.ErrBadRecallHandle, sent nowhere.
func (p *Producer) Recall(ctx context.Context, topic, handle string) (string, error) {
	if err := p.begin(); err != nil {
		return "", err
	}
	defer p.wg.Done()
	if err := protocol.ValidateTopic(topic); err != nil {
		return "", fmt.Errorf("producer: recall: %w", err)
	}
	if protocol.IsRetryTopic(topic) || strings.HasPrefix(topic, protocol.DLQGroupPrefix) {
		return "", fmt.Errorf("producer: recall: topic %s is not supported", topic)
	}
	brokerName, err := client.RecallHandleBroker(handle)
	if err != nil {
		return "", fmt.Errorf("producer: recall in %s: %w", topic, err)
	}
	deadline := p.deadline(ctx)
	route, err := p.publishRoute(ctx, topic, deadline)
	if err != nil {
		return "", fmt.Errorf("producer: recall in %s: %w", topic, err)
	}
	addr, ok := p.c.BrokerAddr(brokerName)
	if !ok {
		for _, q := range route.Publish {
			if addr, ok = p.c.BrokerAddr(q.BrokerName); ok {
				break
			}
		}
	}
	if !ok {
		return "", fmt.Errorf("producer: recall in %s: %w: %s", topic, client.ErrBrokerNotFound, brokerName)
	}
	req := client.NewRequest(remoting.RecallMessage, map[string]string{
		"producerGroup": p.group, "topic": topic, "recallHandle": handle, "bname": brokerName,
	}, nil)
	resp, err := p.c.InvokeDeadline(ctx, addr, req, deadline)
	if err != nil {
		return "", fmt.Errorf("producer: recall in %s: %w", topic, err)
	}
	if resp.Code != remoting.Success {
		return "", fmt.Errorf("producer: recall in %s: %w", topic, client.NewBrokerError(addr, resp))
	}
	return resp.Ext("msgId"), nil
}
