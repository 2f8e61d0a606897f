package client

import (
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
)

// ErrBadRecallHandle is a recall handle that is not RocketMQ's v1 format
// (base64url of "v1 <topic> <broker> <time> <message id>").
var ErrBadRecallHandle = errors.New("client: recall handle is invalid")

// RecallHandleBroker returns the broker name a recall handle
// (SendResult.RecallHandle) names, where RECALL_MESSAGE goes; it reads
// the handle as RocketMQ's RecallMessageHandle.decodeHandle does.
func RecallHandleBroker(handle string) (string, error) {
	if handle == "" {
		return "", fmt.Errorf("%w: empty", ErrBadRecallHandle)
	}
	raw, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(handle, "="))
	if err != nil {
		return "", fmt.Errorf("%w: not base64url", ErrBadRecallHandle)
	}
	items := strings.Split(string(raw), " ")
	if len(items) < 5 || items[0] != "v1" {
		return "", fmt.Errorf("%w: not a v1 handle", ErrBadRecallHandle)
	}
	return items[2], nil
}
