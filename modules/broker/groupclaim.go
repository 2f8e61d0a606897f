package broker

import "fmt"

// GroupClaim reports whether consumers of another protocol hold group —
// the RocketMQ 5 clients of the gRPC endpoint, whose pop-style
// consumption keeps its own per-message state — and names them.
type GroupClaim func(group string) (holder string, held bool)

// SetGroupClaim installs the claim the 4.x consumer paths respect (nil
// removes it): a group held by 5.x consumers is refused to 4.x consumers'
// heartbeats and pulls, because the two would consume the group's
// messages twice (the pop state and the 4.x offsets move separately).
func (b *Broker) SetGroupClaim(f GroupClaim) {
	if f == nil {
		b.claim.Store(nil)
		return
	}
	b.claim.Store(&f)
}

// groupHeldElsewhere returns the refusal for a 4.x consumer of group, or
// "" when the group is free.
func (b *Broker) groupHeldElsewhere(group string) string {
	f := b.claim.Load()
	if f == nil {
		return ""
	}
	holder, held := (*f)(group)
	if !held {
		return ""
	}
	return fmt.Sprintf("consumer group %s is consumed by RocketMQ 5 clients (%s) on this broker; 4.x and 5.x consumers cannot share a group: use another group, or stop the 5.x consumers first", group, holder)
}

// HasRemotingConsumers reports whether 4.x consumers of group are
// connected (the 5.x endpoint refuses the group to its clients then).
func (b *Broker) HasRemotingConsumers(group string) bool {
	return len(b.clients.consumerIDs(group)) > 0
}
