package broker

import (
	"github.com/quivermq/quiver/core/message"
	"github.com/quivermq/quiver/core/remoting"
)

// SendAnswerExt names one extField a module adds to the answer of a
// single-message send (SEND_MESSAGE, SEND_MESSAGE_V2; not batches, not
// CONSUMER_SEND_MSG_BACK) that was stored: m is the message as the put
// hooks left it. The schedule module answers a held timer message with
// its recall handle ("recallHandle", RocketMQ 5.3's
// SendMessageProcessor.attachRecallHandle). An empty key adds nothing. m
// is borrowed like a PutHook's.
type SendAnswerExt func(m *message.Ext) (key, value string)

// SetSendAnswerExt installs f (nil removes it).
func (b *Broker) SetSendAnswerExt(f SendAnswerExt) {
	if f == nil {
		b.sendExt.Store(nil)
		return
	}
	b.sendExt.Store(&f)
}

// addSendExt adds the installed SendAnswerExt's field to resp.
func (b *Broker) addSendExt(resp *remoting.Command, m *message.Ext) {
	f := b.sendExt.Load()
	if f == nil {
		return
	}
	if k, v := (*f)(m); k != "" {
		resp.SetExt(k, v)
	}
}
