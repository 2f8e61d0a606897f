package producer

import (
	"sync"
	"time"
)

// faultTable is RocketMQ's latency-fault tolerance: a broker that answered
// slowly is set aside for a time that grows with its latency, and one that
// failed or answered busy is isolated.
type faultTable struct {
	mu      sync.Mutex
	until   map[string]time.Time
	isolate time.Duration
	now     func() time.Time
}

// Java's latencyMax / notAvailableDuration tables.
var (
	latencySteps = []time.Duration{50 * time.Millisecond, 100 * time.Millisecond, 550 * time.Millisecond, time.Second, 2 * time.Second, 3 * time.Second, 15 * time.Second}
	pauseSteps   = []time.Duration{0, 0, 30 * time.Second, 60 * time.Second, 2 * time.Minute, 3 * time.Minute, 10 * time.Minute}
)

func newFaultTable(isolate time.Duration) *faultTable {
	return &faultTable{until: map[string]time.Time{}, isolate: isolate, now: time.Now}
}

func (f *faultTable) update(broker string, latency time.Duration, failed bool) {
	var pause time.Duration
	if failed {
		pause = f.isolate
	} else {
		for i := len(latencySteps) - 1; i >= 0; i-- {
			if latency >= latencySteps[i] {
				pause = pauseSteps[i]
				break
			}
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if pause <= 0 {
		delete(f.until, broker)
		return
	}
	f.until[broker] = f.now().Add(pause)
}

func (f *faultTable) available(broker string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	u, ok := f.until[broker]
	if !ok {
		return true
	}
	if !f.now().Before(u) {
		delete(f.until, broker)
		return true
	}
	return false
}
