package controller

import (
	"time"

	"github.com/quivermq/quiver/core/remoting"
)

// Heartbeat is the request code (Quiver-specific) a broker under automatic
// failover sends to every name server each ha.heartbeat_interval. Body:
// JSON HeartbeatBody. Answer SUCCESS with a JSON View; a name server
// without a controller answers REQUEST_CODE_NOT_SUPPORTED.
const Heartbeat = remoting.ControllerHeartbeat

// HeartbeatBody is what a broker reports about itself.
type HeartbeatBody struct {
	Cluster string `json:"cluster"`
	Name    string `json:"name"`
	// MemberID is the broker's configured broker.id: its identity in the
	// group, whatever id it registers with now.
	MemberID int64  `json:"memberId"`
	Addr     string `json:"addr"`
	// Epoch is the last epoch the broker served or followed (0: none).
	Epoch int64 `json:"epoch"`
	// Master: the broker acts as the master of Epoch (accepts writes).
	Master bool `json:"master"`
	// Founder: a configured master (broker.id 0) that may found the group
	// (epoch 1) when the controllers know none.
	Founder bool `json:"founder,omitempty"`
	// Ready: the broker was elected master of Epoch, stopped following and
	// Offset is its final commit-log end (the epoch's start offset).
	Ready bool `json:"ready,omitempty"`
	// Offset is the broker's commit-log end.
	Offset int64 `json:"offset"`
	// InSync (a master only) lists the member ids of the slaves within
	// ha.slave_fall_behind_max of its end and heard from recently.
	InSync []int64 `json:"inSync,omitempty"`
	// Sync: the group's master is a SYNC_MASTER (a promoted slave becomes
	// one too).
	Sync bool `json:"sync,omitempty"`
	// FailoverTimeout is the broker's ha.failover_timeout; the founder's
	// and then each master's is the group's.
	FailoverTimeout time.Duration `json:"failoverTimeout,omitempty"`
}

// View is a controller's answer: the committed state of the broker's
// group (nil when none), as applied on that controller.
type View struct {
	// Leader: the answering controller is the raft leader.
	Leader bool   `json:"leader"`
	Group  *Group `json:"group,omitempty"`
}
