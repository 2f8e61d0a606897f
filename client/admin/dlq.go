package admin

// Re-delivering dead letters (Quiver's QUIVER_RESEND_DLQ; RocketMQ 4.x's
// console does the same by CONSUME_MESSAGE_DIRECTLY to one consumer).

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/quivermq/quiver/client"
	"github.com/quivermq/quiver/core/remoting"
)

// ResentLetter is one dead letter re-delivered to %RETRY%<group>.
type ResentLetter struct {
	MsgID       string `json:"msgId"`          // UNIQ_KEY
	OffsetMsgID string `json:"offsetMsgId"`    // of the dead letter
	Topic       string `json:"topic"`          // original topic (RETRY_TOPIC)
	NewOffset   string `json:"newOffsetMsgId"` // of its copy in the retry topic
}

// DLQResend is one broker's answer to ResendDLQ.
type DLQResend struct {
	Group  string         `json:"group"`
	Resent []ResentLetter `json:"resent"`
	// Skipped were resent before (their copy in the retry topic carries
	// RESENT_FROM_DLQ); Again resends them.
	Skipped []ResentLetter `json:"skipped,omitempty"`
}

// ResendSpec says which dead letters of a group ResendDLQ re-delivers.
type ResendSpec struct {
	Group string
	// MsgID names one dead letter (its UNIQ_KEY, ORIGIN_MESSAGE_ID or
	// offsetMsgId); empty resends every one.
	MsgID string
	// Again also resends dead letters resent before.
	Again bool
}

// ResendDLQ asks the broker at addr to re-deliver dead letters of
// spec.Group from %DLQ%<group> to %RETRY%<group>, so that only that group
// consumes them again (QUIVER_RESEND_DLQ, a Quiver broker's). When the
// broker does not hold the dead letter named by spec.MsgID the error wraps
// ErrMessageNotFound; another refusal wraps a *client.BrokerError.
func (a *Admin) ResendDLQ(ctx context.Context, addr string, spec ResendSpec) (*DLQResend, error) {
	ext := map[string]string{"group": spec.Group}
	if spec.MsgID != "" {
		ext["msgId"] = spec.MsgID
	} else {
		ext["all"] = "true"
	}
	if spec.Again {
		ext["again"] = "true"
	}
	resp, err := a.c.Invoke(ctx, addr, client.NewRequest(remoting.ResendDLQ, ext, nil))
	if err != nil {
		return nil, fmt.Errorf("admin: resend dead letters of %s on %s: %w", spec.Group, addr, err)
	}
	switch resp.Code {
	case remoting.Success:
	case remoting.QueryNotFound:
		return nil, fmt.Errorf("admin: resend dead letters of %s on %s: %w: %w", spec.Group, addr, ErrMessageNotFound, client.NewBrokerError(addr, resp))
	default:
		return nil, fmt.Errorf("admin: resend dead letters of %s on %s: %w", spec.Group, addr, client.NewBrokerError(addr, resp))
	}
	var res DLQResend
	if err := json.Unmarshal(resp.Body, &res); err != nil {
		return nil, fmt.Errorf("admin: decode resend answer of %s: %w", addr, err)
	}
	if res.Resent == nil {
		res.Resent = []ResentLetter{}
	}
	return &res, nil
}
