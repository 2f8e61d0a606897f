package producer

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/quivermq/quiver/client"
	"github.com/quivermq/quiver/core/message"
	"github.com/quivermq/quiver/core/remoting"
)

// LocalTransactionState is a local transaction's outcome.
type LocalTransactionState int

// Local transaction states.
const (
	// Unknown leaves the half message for the broker to check later.
	Unknown LocalTransactionState = iota
	// Commit delivers the half message.
	Commit
	// Rollback discards it.
	Rollback
)

func (s LocalTransactionState) String() string {
	switch s {
	case Commit:
		return "COMMIT"
	case Rollback:
		return "ROLLBACK"
	}
	return "UNKNOWN"
}

// code is END_TRANSACTION's commitOrRollback value.
func (s LocalTransactionState) code() int32 {
	switch s {
	case Commit:
		return message.TransactionCommit
	case Rollback:
		return message.TransactionRollback
	}
	return message.TransactionNotType
}

// TransactionListener runs local transactions and answers the broker's
// checks of half messages whose outcome it has not heard.
type TransactionListener interface {
	ExecuteLocalTransaction(ctx context.Context, msg *client.Message) LocalTransactionState
	CheckLocalTransaction(ctx context.Context, msg *client.MessageExt) LocalTransactionState
}

// TransactionProducer sends transactional (half) messages.
type TransactionProducer struct {
	*Producer
}

// TransactionResult is a transactional send's outcome.
type TransactionResult struct {
	*client.SendResult
	State LocalTransactionState
}

// NewTransactional registers a transactional producer group.
func NewTransactional(c *client.Client, group string, l TransactionListener, opts ...Option) (*TransactionProducer, error) {
	if l == nil {
		return nil, errors.New("producer: nil transaction listener")
	}
	p, err := New(c, group, append(opts, func(o *options) { o.checker = l })...)
	if err != nil {
		return nil, err
	}
	return &TransactionProducer{Producer: p}, nil
}

// SendMessageInTransaction sends msg as a half message (TRAN_MSG=true,
// PGROUP=group, sysFlag|4), runs the local transaction when it was
// stored, and reports the outcome to the broker with END_TRANSACTION
// (oneway, as the official client). A failed send returns the error and
// runs nothing.
func (t *TransactionProducer) SendMessageInTransaction(ctx context.Context, msg *client.Message) (*TransactionResult, error) {
	if err := t.begin(); err != nil {
		return nil, err
	}
	defer t.wg.Done()
	m := *msg
	m.Properties = message.Properties(msg.Properties).Clone()
	m.Properties[message.PropertyTransactionPrepared] = "true"
	m.Properties[message.PropertyProducerGroup] = t.group
	delete(m.Properties, message.PropertyDelayTimeLevel)
	pr, err := t.prepare([]*client.Message{&m})
	if err != nil {
		return nil, err
	}
	start := time.Now()
	res, err := t.send(ctx, pr, t.o.retries, t.o.selector)
	t.tracePub(&m, res, start) // trace.go
	if err != nil {
		return nil, err
	}
	st := Rollback
	if res.Status == client.SendOK {
		st = t.safeExecute(ctx, &m)
	}
	if msg.Properties == nil {
		msg.Properties = map[string]string{}
	}
	msg.Properties["__transactionId__"] = res.TransactionID
	if err := t.endTransaction(ctx, res, st); err != nil {
		t.log.Warn("end transaction", "msgId", res.MsgID, "err", err)
	} else {
		addr, _ := t.c.BrokerAddr(res.Queue.BrokerName)
		t.traceEnd(&m, res.MsgID, res.TransactionID, addr, st, false)
	}
	return &TransactionResult{SendResult: res, State: st}, nil
}

func (t *TransactionProducer) safeExecute(ctx context.Context, m *client.Message) (st LocalTransactionState) {
	defer func() {
		if r := recover(); r != nil {
			t.log.Error("local transaction panicked", "panic", r)
			st = Unknown
		}
	}()
	return t.o.checker.ExecuteLocalTransaction(ctx, m)
}

func (t *TransactionProducer) endTransaction(ctx context.Context, res *client.SendResult, st LocalTransactionState) error {
	_, off, err := message.ParseOffsetMsgID(res.OffsetMsgID)
	if err != nil {
		return fmt.Errorf("producer: end transaction: %w", err)
	}
	addr, ok := t.c.BrokerAddr(res.Queue.BrokerName)
	if !ok {
		return fmt.Errorf("producer: end transaction: %w: %s", client.ErrBrokerNotFound, res.Queue.BrokerName)
	}
	req := client.NewRequest(remoting.EndTransaction, map[string]string{
		"producerGroup":        t.group,
		"tranStateTableOffset": strconv.FormatInt(res.QueueOffset, 10),
		"commitLogOffset":      strconv.FormatInt(off, 10),
		"commitOrRollback":     strconv.Itoa(int(st.code())),
		"fromTransactionCheck": "false",
		"msgId":                res.MsgID,
		"transactionId":        res.TransactionID,
		"bname":                res.Queue.BrokerName,
	}, nil)
	return t.c.SendOneway(ctx, addr, req)
}
