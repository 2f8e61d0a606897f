package broker

import (
	"context"
	"encoding/json"
	"strconv"

	"github.com/quivermq/quiver/core/remoting"
)

// consumerOffsetWrapper is Java's ConsumerOffsetSerializeWrapper, the
// GET_ALL_CONSUMER_OFFSET (43) body. Queue ids are written as quoted keys
// (standard JSON; Java's fastjson writes them unquoted and reads both).
type consumerOffsetWrapper struct {
	OffsetTable map[string]map[string]int64 `json:"offsetTable"`
}

// handleAllConsumerOffset answers GET_ALL_CONSUMER_OFFSET (43): every
// committed offset, "topic@group" → queue id → offset. Slaves fetch it from
// their master, and a master from its slave (modules/ha).
func (b *Broker) handleAllConsumerOffset(ctx context.Context, p *remoting.Peer, req *remoting.Command) *remoting.Command {
	table := b.OffsetTable()
	w := consumerOffsetWrapper{OffsetTable: make(map[string]map[string]int64, len(table))}
	for k, qs := range table {
		m := make(map[string]int64, len(qs))
		for q, off := range qs {
			m[strconv.Itoa(int(q))] = off
		}
		w.OffsetTable[k] = m
	}
	resp := remoting.NewResponse(req, remoting.Success, "")
	resp.Body, _ = json.Marshal(&w)
	return resp
}

// DecodeConsumerOffsets parses a GET_ALL_CONSUMER_OFFSET body.
func DecodeConsumerOffsets(body []byte) (map[string]map[int32]int64, error) {
	var w consumerOffsetWrapper
	if err := json.Unmarshal(body, &w); err != nil {
		return nil, err
	}
	out := make(map[string]map[int32]int64, len(w.OffsetTable))
	for k, qs := range w.OffsetTable {
		m := make(map[int32]int64, len(qs))
		for q, off := range qs {
			n, err := strconv.ParseInt(q, 10, 32)
			if err != nil {
				continue
			}
			m[int32(n)] = off
		}
		out[k] = m
	}
	return out, nil
}
