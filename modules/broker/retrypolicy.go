package broker

import (
	"fmt"
	"time"
)

// GroupRetryPolicy is RocketMQ 5's SubscriptionGroupConfig.groupRetryPolicy:
// how long a 5.x consumer of the group waits before a failed message comes
// back. Type is "CUSTOMIZED" (the default: the 4.x delay levels from 1s to
// 2h) or "EXPONENTIAL".
type GroupRetryPolicy struct {
	Type                   string                  `json:"type"`
	ExponentialRetryPolicy *ExponentialRetryPolicy `json:"exponentialRetryPolicy,omitempty"`
	CustomizedRetryPolicy  *CustomizedRetryPolicy  `json:"customizedRetryPolicy,omitempty"`
}

// ExponentialRetryPolicy waits Initial·Multiplier^(n-1), at most Max
// (milliseconds), before the n-th retry.
type ExponentialRetryPolicy struct {
	Initial    int64 `json:"initial"`
	Max        int64 `json:"max"`
	Multiplier int64 `json:"multiplier"`
}

// CustomizedRetryPolicy waits Next[n-1] milliseconds before the n-th retry
// (the last entry for the ones beyond).
type CustomizedRetryPolicy struct {
	Next []int64 `json:"next"`
}

// Retry policy types.
const (
	RetryCustomized  = "CUSTOMIZED"
	RetryExponential = "EXPONENTIAL"
)

// DefaultRetryDelays are RocketMQ's CustomizedRetryPolicy defaults, the 4.x
// delay levels from level 3: 1s 5s 10s 30s 1m … 10m 20m 30m 1h 2h.
var DefaultRetryDelays = []time.Duration{
	time.Second, 5 * time.Second, 10 * time.Second, 30 * time.Second,
	time.Minute, 2 * time.Minute, 3 * time.Minute, 4 * time.Minute, 5 * time.Minute,
	6 * time.Minute, 7 * time.Minute, 8 * time.Minute, 9 * time.Minute, 10 * time.Minute,
	20 * time.Minute, 30 * time.Minute, time.Hour, 2 * time.Hour,
}

// RetryPolicy is a group's retry policy resolved with RocketMQ 5's
// defaults: MaxAttempts deliveries in all (retryMaxTimes + 1), then the
// dead-letter queue; either Delays (customized) or an exponential series.
type RetryPolicy struct {
	MaxAttempts int32
	// Exponential is set for EXPONENTIAL; Delays otherwise.
	Exponential bool
	Initial     time.Duration
	Max         time.Duration
	Multiplier  float64
	Delays      []time.Duration
}

// RetryPolicy resolves the group's policy (RocketMQ 5's proxy merges the
// same fields into the settings it answers 5.x consumers). A negative
// retryMaxTimes means no retries, as 0 does.
func (c *GroupConfig) RetryPolicy() RetryPolicy {
	p := RetryPolicy{MaxAttempts: max(c.RetryMaxTimes, 0) + 1}
	gp := c.GroupRetryPolicy
	if gp != nil && gp.Type == RetryExponential {
		e := ExponentialRetryPolicy{Initial: 5000, Max: 2 * 3600 * 1000, Multiplier: 2} // Java's defaults
		if gp.ExponentialRetryPolicy != nil {
			e = *gp.ExponentialRetryPolicy
		}
		p.Exponential = true
		p.Initial = time.Duration(max(e.Initial, 0)) * time.Millisecond
		p.Max = time.Duration(max(e.Max, 0)) * time.Millisecond
		p.Multiplier = float64(max(e.Multiplier, 1))
		return p
	}
	p.Delays = DefaultRetryDelays
	if gp != nil && gp.CustomizedRetryPolicy != nil && len(gp.CustomizedRetryPolicy.Next) > 0 {
		p.Delays = make([]time.Duration, len(gp.CustomizedRetryPolicy.Next))
		for i, ms := range gp.CustomizedRetryPolicy.Next {
			p.Delays[i] = time.Duration(max(ms, 0)) * time.Millisecond
		}
	}
	return p
}

// Delay is how long the policy waits before the given retry (1 = the
// second delivery).
func (p RetryPolicy) Delay(retry int32) time.Duration {
	retry = max(retry, 1)
	if p.Exponential {
		d := float64(p.Initial)
		for i := int32(1); i < retry && d < float64(p.Max); i++ {
			d *= p.Multiplier
		}
		return min(time.Duration(d), p.Max)
	}
	if len(p.Delays) == 0 {
		return 0
	}
	return p.Delays[min(int(retry), len(p.Delays))-1]
}

// validateRetryPolicy refuses a policy a 5.x client could not follow.
func validateRetryPolicy(gp *GroupRetryPolicy) error {
	if gp == nil {
		return nil
	}
	switch gp.Type {
	case RetryCustomized, "":
		if c := gp.CustomizedRetryPolicy; c != nil {
			for _, ms := range c.Next {
				if ms < 0 {
					return fmt.Errorf("groupRetryPolicy: negative delay %d ms", ms)
				}
			}
		}
	case RetryExponential:
		if e := gp.ExponentialRetryPolicy; e != nil && (e.Initial < 0 || e.Max < e.Initial || e.Multiplier < 1) {
			return fmt.Errorf("groupRetryPolicy: exponential initial %d, max %d, multiplier %d (want 0 <= initial <= max, multiplier >= 1)", e.Initial, e.Max, e.Multiplier)
		}
	default:
		return fmt.Errorf("groupRetryPolicy: unknown type %q (want CUSTOMIZED or EXPONENTIAL)", gp.Type)
	}
	return nil
}

// NewRetryPolicyDefault is the policy of a group with the default
// configuration.
func NewRetryPolicyDefault() RetryPolicy { return defaultGroupConfig("").RetryPolicy() }
