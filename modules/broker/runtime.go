package broker

import (
	"context"
	"encoding/json"
	"strconv"
	"time"

	"github.com/quivermq/quiver/core/remoting"
)

// PhysOffsetRanger is implemented by stores that know their commit-log
// range; GET_BROKER_RUNTIME_INFO then reports it exactly. Otherwise the
// broker reports the highest end it stored since it started.
type PhysOffsetRanger interface {
	PhysOffsets() (min, max int64)
}

// RuntimeInfo returns the broker's running figures, keyed as
// GET_BROKER_RUNTIME_INFO answers them: RocketMQ's names where the
// meaning is the same (counts are since start, not since midnight), and
// quiver-prefixed ones for the rest.
func (b *Broker) RuntimeInfo() map[string]string {
	o := &b.obs
	i := func(n int64) string { return strconv.FormatInt(n, 10) }
	t := map[string]string{
		"brokerVersionDesc":   "V4_9_8",
		"brokerVersion":       strconv.Itoa(remoting.ServerVersion),
		"bootTimestamp":       i(o.bootMs),
		"msgPutTotalTodayNow": i(o.putMsgs.Load()),
		"msgGetTotalTodayNow": i(o.getMsgs.Load()),
		"commitLogMaxOffset":  i(o.maxPhys.Load()),
		"quiverBytesPutTotal": i(o.putBytes.Load()),
		"quiverBytesGetTotal": i(o.getBytes.Load()),
		"quiverHeldPulls":     strconv.Itoa(b.holds.held()),
		"quiverConnections":   strconv.Itoa(len(b.Peers())),
	}
	if pr, ok := b.store.(PhysOffsetRanger); ok {
		min, max := pr.PhysOffsets()
		t["commitLogMinOffset"], t["commitLogMaxOffset"] = i(min), i(max)
	}
	if b.server != nil {
		t["quiverConnectionsRefused"] = i(b.server.Refused())
	}
	for k, v := range b.flowFigures() {
		t[k] = v
	}
	return t
}

// flowFigures are the flow-control counters (busy answers by reason).
func (b *Broker) flowFigures() map[string]string {
	fs := b.FlowStats()
	i := func(n int64) string { return strconv.FormatInt(n, 10) }
	return map[string]string{
		"quiverFlowBusyQueue": i(fs.BusyQueue), "quiverFlowBusyStore": i(fs.BusyStore), "quiverFlowBusyQuota": i(fs.BusyQuota),
		"quiverFlowInFlight": i(fs.InFlight), "quiverFlowCapacity": strconv.Itoa(fs.Capacity), "quiverStoreDiskFull": i(fs.DiskFull),
		"quiverStoreWriteFailed": i(fs.StoreFailed),
	}
}

func (b *Broker) handleRuntimeInfo(ctx context.Context, p *remoting.Peer, req *remoting.Command) *remoting.Command {
	resp := remoting.NewResponse(req, remoting.Success, "")
	resp.Body, _ = json.Marshal(map[string]any{"table": b.RuntimeInfo()})
	return resp
}

func nowMs() int64 { return time.Now().UnixMilli() }
