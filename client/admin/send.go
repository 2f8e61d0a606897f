package admin

// Sending one message to a queue the caller chose (SEND_MESSAGE), as
// mqadmin sendMessage and load generators do: no producer, no queue
// selection, no retries. Applications send with client/producer.

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/quivermq/quiver/client"
	"github.com/quivermq/quiver/core/message"
	"github.com/quivermq/quiver/core/protocol"
	"github.com/quivermq/quiver/core/remoting"
	"github.com/quivermq/quiver/core/remoting/codec"
)

// SendRequest is one message for one queue (Java's
// SendMessageRequestHeader and the body).
type SendRequest struct {
	Group   string // producerGroup
	Topic   string
	QueueID int
	// Properties are sent as they are (encoded); set UNIQ_KEY for a
	// msgId, WAIT=true to wait for the store.
	Properties message.Properties
	Body       []byte
	// MaxReconsumeTimes is sent when positive.
	MaxReconsumeTimes int
}

// SendAnswer is the broker's answer to a send (SendMessageResponseHeader).
type SendAnswer struct {
	// OffsetMsgID is the stored message's id (store host and commit-log
	// offset), the answer's msgId field.
	OffsetMsgID string
	QueueID     int
	QueueOffset int64
	// RecallHandle is set for a timer message the broker holds
	// (client.SendResult.RecallHandle); Admin.Recall takes it.
	RecallHandle string
}

func sendRequest(sr SendRequest) *remoting.Command {
	ext := map[string]string{
		"producerGroup": sr.Group, "topic": sr.Topic, "defaultTopic": protocol.AutoCreateTopic, "defaultTopicQueueNums": "4",
		"queueId": strconv.Itoa(sr.QueueID), "sysFlag": "0", "bornTimestamp": strconv.FormatInt(time.Now().UnixMilli(), 10), "flag": "0",
		"properties": sr.Properties.Encode(), "reconsumeTimes": "0", "unitMode": "false", "batch": "false",
	}
	if sr.MaxReconsumeTimes > 0 {
		ext["maxReconsumeTimes"] = strconv.Itoa(sr.MaxReconsumeTimes)
	}
	return client.NewRequest(remoting.SendMessage, ext, sr.Body)
}

// SendDirect sends one message to queue sr.QueueID of the broker at addr
// and waits for the answer. A refusal (the topic not writable there, no
// permission, a full store: any code but SUCCESS) is an error wrapping a
// *client.BrokerError.
func (a *Admin) SendDirect(ctx context.Context, addr string, sr SendRequest) (*SendAnswer, error) {
	resp, err := a.invokeOK(ctx, addr, sendRequest(sr))
	if err != nil {
		return nil, fmt.Errorf("admin: send to %s queue %d on %s: %w", sr.Topic, sr.QueueID, addr, err)
	}
	ans := &SendAnswer{OffsetMsgID: resp.Ext("msgId"), QueueID: sr.QueueID, RecallHandle: resp.Ext("recallHandle")}
	if s := resp.Ext("queueId"); s != "" {
		if n, err := strconv.Atoi(s); err == nil {
			ans.QueueID = n
		}
	}
	if ans.QueueOffset, err = strconv.ParseInt(resp.Ext("queueOffset"), 10, 64); err != nil {
		return nil, fmt.Errorf("admin: send to %s queue %d on %s: answer's queueOffset %q: %w", sr.Topic, sr.QueueID, addr, resp.Ext("queueOffset"), err)
	}
	return ans, nil
}

// SendDirectOneway writes one message for queue sr.QueueID to the broker
// at addr with the oneway flag set: the broker does not answer, and
// whether it stored the message is not known.
func (a *Admin) SendDirectOneway(ctx context.Context, addr string, sr SendRequest) error {
	req := sendRequest(sr)
	req.Flag |= codec.FlagOneway
	if err := a.c.SendOneway(ctx, addr, req); err != nil {
		return fmt.Errorf("admin: oneway send to %s queue %d on %s: %w", sr.Topic, sr.QueueID, addr, err)
	}
	return nil
}
