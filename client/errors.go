package client

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"

	"github.com/quivermq/quiver/core/remoting"
)

// Sentinel errors.
var (
	// ErrNoRoute: the name servers know no route for the topic (or none
	// with a writeable/readable queue).
	ErrNoRoute = errors.New("client: no route for topic")
	// ErrTimeout: a call did not complete within its timeout or deadline.
	ErrTimeout = errors.New("client: timeout")
	// ErrClosed: the client, producer or consumer was shut down.
	ErrClosed = errors.New("client: closed")
	// ErrNoNameServer: no name-server address was configured.
	ErrNoNameServer = errors.New("client: no name server configured")
	// ErrBrokerNotFound: no address is known for the broker name.
	ErrBrokerNotFound = errors.New("client: broker address not found")
)

// BrokerError is a response with a non-success code.
type BrokerError struct {
	Code   int32
	Remark string
	// Addr is the broker or name server that answered.
	Addr string
}

func (e *BrokerError) Error() string {
	return fmt.Sprintf("client: %s answered code %d (%s): %s", e.Addr, e.Code, CodeName(e.Code), e.Remark)
}

// CodeOf returns the response code carried by err, or -1.
func CodeOf(err error) int32 {
	var be *BrokerError
	if errors.As(err, &be) {
		return be.Code
	}
	return -1
}

// NewBrokerError builds the error for a response.
func NewBrokerError(addr string, resp *remoting.Command) *BrokerError {
	return &BrokerError{Code: resp.Code, Remark: resp.Remark, Addr: addr}
}

// CodeName names well-known response codes.
func CodeName(code int32) string {
	switch code {
	case remoting.Success:
		return "SUCCESS"
	case remoting.SystemError:
		return "SYSTEM_ERROR"
	case remoting.SystemBusy:
		return "SYSTEM_BUSY"
	case remoting.RequestCodeNotSupported:
		return "REQUEST_CODE_NOT_SUPPORTED"
	case remoting.FlushDiskTimeout:
		return "FLUSH_DISK_TIMEOUT"
	case remoting.SlaveNotAvailable:
		return "SLAVE_NOT_AVAILABLE"
	case remoting.FlushSlaveTimeout:
		return "FLUSH_SLAVE_TIMEOUT"
	case remoting.MessageIllegal:
		return "MESSAGE_ILLEGAL"
	case remoting.ServiceNotAvailable:
		return "SERVICE_NOT_AVAILABLE"
	case remoting.NoPermission:
		return "NO_PERMISSION"
	case remoting.TopicNotExist:
		return "TOPIC_NOT_EXIST"
	case remoting.PullNotFound:
		return "PULL_NOT_FOUND"
	case remoting.PullRetryImmediately:
		return "PULL_RETRY_IMMEDIATELY"
	case remoting.PullOffsetMoved:
		return "PULL_OFFSET_MOVED"
	case remoting.QueryNotFound:
		return "QUERY_NOT_FOUND"
	case remoting.SubscriptionNotExist:
		return "SUBSCRIPTION_NOT_EXIST"
	case remoting.SubscriptionNotLatest:
		return "SUBSCRIPTION_NOT_LATEST"
	case remoting.FlowControl:
		return "FLOW_CONTROL"
	}
	return "UNKNOWN"
}

// wrapCallErr maps transport and context errors: deadline expiry becomes
// ErrTimeout (still matching context.DeadlineExceeded).
func wrapCallErr(addr string, code int32, err error) error {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded) {
		return fmt.Errorf("client: request %d to %s: %w (%w)", code, addr, ErrTimeout, err)
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return fmt.Errorf("client: request %d to %s: %w (%w)", code, addr, ErrTimeout, err)
	}
	return fmt.Errorf("client: request %d to %s: %w", code, addr, err)
}
