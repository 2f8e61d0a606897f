package admin

import (
	"context"
	"fmt"

	"github.com/quivermq/quiver/client"
	"github.com/quivermq/quiver/core/protocol"
	"github.com/quivermq/quiver/core/remoting"
)

// Recall takes back a timer message of topic by its recall handle
// (RECALL_MESSAGE, as client/producer's Producer.Recall) and returns its
// message id (the UNIQ_KEY). The request goes to the master of the broker
// the handle names, found in the topic's route; group is the
// producerGroup the request carries (Java: the producer's group). A
// refusal is an error wrapping a *client.BrokerError; a handle that is
// not RocketMQ's v1 format, client.ErrBadRecallHandle.
func (a *Admin) Recall(ctx context.Context, group, topic, handle string) (string, error) {
	brokerName, err := client.RecallHandleBroker(handle)
	if err != nil {
		return "", fmt.Errorf("admin: recall in %s: %w", topic, err)
	}
	r, err := a.Route(ctx, topic)
	if err != nil {
		return "", fmt.Errorf("admin: recall in %s: %w", topic, err)
	}
	addr := ""
	for _, bd := range r.Data.BrokerDatas {
		if bd.BrokerName == brokerName {
			addr = bd.BrokerAddrs[protocol.MasterID]
		}
	}
	if addr == "" {
		return "", fmt.Errorf("admin: recall in %s: %w: %s has no master in the topic's route", topic, client.ErrBrokerNotFound, brokerName)
	}
	req := client.NewRequest(remoting.RecallMessage, map[string]string{
		"producerGroup": group, "topic": topic, "recallHandle": handle, "bname": brokerName,
	}, nil)
	resp, err := a.invokeOK(ctx, addr, req)
	if err != nil {
		return "", fmt.Errorf("admin: recall in %s on %s: %w", topic, addr, err)
	}
	return resp.Ext("msgId"), nil
}
