package grpc

import (
	"github.com/quivermq/quiver/core/grpcapi"
	"github.com/quivermq/quiver/modules/broker"
	"google.golang.org/protobuf/types/known/durationpb"
)

// groupPolicy is the retry policy 5.x consumers of group follow — the
// subscription group's retryMaxTimes + 1 attempts and its groupRetryPolicy
// (customized delays, the 4.x levels by default, or exponential) — and
// whether the group is consumed in order (consumeMessageOrderly).
// PushConsumers wait the policy's delay (through ChangeInvisibleDuration)
// before a failed message comes back; the pop service moves a message
// whose attempts are used up to %DLQ%<group>. An unnamed group gets
// RocketMQ 5's defaults.
func (s *Server) groupPolicy(group string) (broker.RetryPolicy, bool) {
	if group != "" {
		if gc, err := s.b.GroupConfig(group); err == nil {
			return gc.RetryPolicy(), gc.ConsumeMessageOrderly
		}
	}
	return broker.NewRetryPolicyDefault(), false
}

func retryPolicyProto(p broker.RetryPolicy) *grpcapi.RetryPolicy {
	out := &grpcapi.RetryPolicy{MaxAttempts: p.MaxAttempts}
	if p.Exponential {
		out.Strategy = &grpcapi.RetryPolicy_ExponentialBackoff{ExponentialBackoff: &grpcapi.ExponentialBackoff{
			Initial: durationpb.New(p.Initial), Max: durationpb.New(p.Max), Multiplier: float32(p.Multiplier),
		}}
		return out
	}
	next := make([]*durationpb.Duration, len(p.Delays))
	for i, d := range p.Delays {
		next[i] = durationpb.New(d)
	}
	out.Strategy = &grpcapi.RetryPolicy_CustomizedBackoff{CustomizedBackoff: &grpcapi.CustomizedBackoff{Next: next}}
	return out
}
