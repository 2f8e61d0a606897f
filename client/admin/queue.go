package admin

// One queue of one broker: its offsets (GET_MIN_OFFSET, GET_MAX_OFFSET,
// SEARCH_OFFSET_BY_TIMESTAMP) and reading it without a consumer's state
// (PULL_MESSAGE with nothing committed), as mqadmin's tools read queues.

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/quivermq/quiver/client"
	"github.com/quivermq/quiver/core/message"
	"github.com/quivermq/quiver/core/remoting"
)

// MinOffset is the first offset still stored in queue queueID of topic
// on the broker at addr (GET_MIN_OFFSET).
func (a *Admin) MinOffset(ctx context.Context, addr, topic string, queueID int) (int64, error) {
	off, err := a.queueOffset(ctx, addr, remoting.GetMinOffset, topic, queueID, nil)
	if err != nil {
		return 0, fmt.Errorf("admin: min offset of %s queue %d on %s: %w", topic, queueID, addr, err)
	}
	return off, nil
}

// MaxOffset is the next offset to be written in queue queueID of topic
// on the broker at addr (GET_MAX_OFFSET).
func (a *Admin) MaxOffset(ctx context.Context, addr, topic string, queueID int) (int64, error) {
	off, err := a.queueOffset(ctx, addr, remoting.GetMaxOffset, topic, queueID, nil)
	if err != nil {
		return 0, fmt.Errorf("admin: max offset of %s queue %d on %s: %w", topic, queueID, addr, err)
	}
	return off, nil
}

// SearchOffset is the offset of the first message of queue queueID of
// topic stored at or after timestamp (epoch ms) on the broker at addr
// (SEARCH_OFFSET_BY_TIMESTAMP); past the last message it is the queue's
// max offset.
func (a *Admin) SearchOffset(ctx context.Context, addr, topic string, queueID int, timestamp int64) (int64, error) {
	off, err := a.queueOffset(ctx, addr, remoting.SearchOffsetByTimestamp, topic, queueID, map[string]string{"timestamp": strconv.FormatInt(timestamp, 10)})
	if err != nil {
		return 0, fmt.Errorf("admin: search offset of %s queue %d at %d on %s: %w", topic, queueID, timestamp, addr, err)
	}
	return off, nil
}

// queueOffset sends one of the offset requests (Java's
// GetMinOffsetRequestHeader, GetMaxOffsetRequestHeader,
// SearchOffsetRequestHeader: topic, queueId, and timestamp for the
// search) and reads the answer's offset field.
func (a *Admin) queueOffset(ctx context.Context, addr string, code int32, topic string, queueID int, more map[string]string) (int64, error) {
	ext := map[string]string{"topic": topic, "queueId": strconv.Itoa(queueID)}
	for k, v := range more {
		ext[k] = v
	}
	resp, err := a.invokeOK(ctx, addr, client.NewRequest(code, ext, nil))
	if err != nil {
		return 0, err
	}
	off, err := strconv.ParseInt(resp.Ext("offset"), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("answer's offset %q: %w", resp.Ext("offset"), err)
	}
	return off, nil
}

// PullStatus is how a pull ended, as Java's PullStatus.
type PullStatus int

// The pull outcomes, mapped from the answer's code as Java's
// MQClientAPIImpl.processPullResponse does.
const (
	// PullFound: the answer carries messages (SUCCESS).
	PullFound PullStatus = iota
	// PullNoNewMsg: nothing at or after the offset yet (PULL_NOT_FOUND).
	PullNoNewMsg
	// PullNoMatchedMsg: messages were there but none matched the
	// subscription; go on at NextBeginOffset (PULL_RETRY_IMMEDIATELY).
	PullNoMatchedMsg
	// PullOffsetIllegal: the offset is outside the queue
	// (PULL_OFFSET_MOVED); NextBeginOffset is where to go on.
	PullOffsetIllegal
)

func (s PullStatus) String() string {
	switch s {
	case PullFound:
		return "FOUND"
	case PullNoNewMsg:
		return "NO_NEW_MSG"
	case PullNoMatchedMsg:
		return "NO_MATCHED_MSG"
	case PullOffsetIllegal:
		return "OFFSET_ILLEGAL"
	}
	return "PullStatus(" + strconv.Itoa(int(s)) + ")"
}

// PullRequest names the messages a Pull reads.
type PullRequest struct {
	// Group is the consumer group named in the request (nothing is
	// committed for it); empty means TOOLS_CONSUMER, as mqadmin's.
	Group   string
	Topic   string
	QueueID int
	Offset  int64
	// MaxNums bounds the messages of the answer (default 32).
	MaxNums int
	// ExpressionType is TAG (default) or SQL92; Expression the
	// subscription the broker filters by (default "*").
	ExpressionType, Expression string
}

// PullResult is a pull's answer.
type PullResult struct {
	Status PullStatus
	// NextBeginOffset is where the next pull starts, -1 when the answer
	// has none; MinOffset and MaxOffset the queue's, as the broker
	// reported them.
	NextBeginOffset, MinOffset, MaxOffset int64
	// Body holds the stored records of the messages (PullFound).
	Body []byte
}

// Messages decodes the records of Body.
func (r *PullResult) Messages() ([]*message.Ext, error) {
	if len(r.Body) == 0 {
		return nil, nil
	}
	return message.DecodeAll(r.Body)
}

// ToolsConsumerGroup is the group mqadmin's tools name in their pulls.
const ToolsConsumerGroup = "TOOLS_CONSUMER"

// Pull reads messages of one queue of the broker at addr from an offset
// (PULL_MESSAGE, Java's PullMessageRequestHeader) without suspending at
// the end of the queue and without committing an offset. A refusal (any
// other code than those of PullStatus) is an error wrapping a
// *client.BrokerError.
func (a *Admin) Pull(ctx context.Context, addr string, pr PullRequest) (*PullResult, error) {
	if pr.Group == "" {
		pr.Group = ToolsConsumerGroup
	}
	if pr.MaxNums <= 0 {
		pr.MaxNums = 32
	}
	if pr.ExpressionType == "" {
		pr.ExpressionType = "TAG"
	}
	if pr.Expression == "" {
		pr.Expression = "*"
	}
	resp, err := a.c.Invoke(ctx, addr, client.NewRequest(remoting.PullMessage, map[string]string{
		"consumerGroup": pr.Group, "topic": pr.Topic, "queueId": strconv.Itoa(pr.QueueID),
		"queueOffset": strconv.FormatInt(pr.Offset, 10), "maxMsgNums": strconv.Itoa(pr.MaxNums),
		"sysFlag": strconv.Itoa(pullSysFlagSubscription), "commitOffset": "0", "suspendTimeoutMillis": "0",
		"subscription": pr.Expression, "subVersion": "0", "expressionType": pr.ExpressionType,
	}, nil))
	if err != nil {
		return nil, fmt.Errorf("admin: pull %s queue %d at %d from %s: %w", pr.Topic, pr.QueueID, pr.Offset, addr, err)
	}
	res := &PullResult{NextBeginOffset: extInt(resp, "nextBeginOffset"), MinOffset: extInt(resp, "minOffset"), MaxOffset: extInt(resp, "maxOffset")}
	switch resp.Code {
	case remoting.Success:
		res.Status, res.Body = PullFound, resp.Body
	case remoting.PullNotFound:
		res.Status = PullNoNewMsg
	case remoting.PullRetryImmediately:
		res.Status = PullNoMatchedMsg
	case remoting.PullOffsetMoved:
		res.Status = PullOffsetIllegal
	default:
		return nil, fmt.Errorf("admin: pull %s queue %d at %d from %s: %w", pr.Topic, pr.QueueID, pr.Offset, addr, client.NewBrokerError(addr, resp))
	}
	return res, nil
}

// pullSysFlagSubscription is PullSysFlag's FLAG_SUBSCRIPTION: the request
// carries its subscription (and no commit, suspend or class filter flag).
const pullSysFlagSubscription = 1 << 2

// extInt reads an integer field of an answer, -1 when absent or not a
// number.
func extInt(resp *remoting.Command, key string) int64 {
	n, err := strconv.ParseInt(resp.Ext(key), 10, 64)
	if err != nil {
		return -1
	}
	return n
}

// IsRefused reports whether err carries a broker's or name server's
// refusal (an answer with a code) rather than a failure to get one.
func IsRefused(err error) bool {
	var be *client.BrokerError
	return errors.As(err, &be)
}
