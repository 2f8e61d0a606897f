package transaction

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/message"
)

// fakeTransport serves the check-backs of one producer group and records
// what it was given (copied: the Check is borrowed).
type fakeTransport struct {
	group string
	mu    sync.Mutex
	got   []Check
}

func (f *fakeTransport) CheckBack(_ context.Context, c Check) bool {
	if c.Group != f.group {
		return false
	}
	m := *c.Message
	m.Properties = c.Message.Properties.Clone()
	m.Body = append([]byte(nil), c.Message.Body...)
	c.Message = &m
	f.mu.Lock()
	f.got = append(f.got, c)
	f.mu.Unlock()
	return true
}

func (f *fakeTransport) checks() []Check {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Check(nil), f.got...)
}

// TestCheckTransport: a registered check transport is asked first and
// gets the half message under its real topic with the half message's
// offsets, which End accepts; a group it declines is left to remoting
// producers (none here: not counted); once removed it is not asked.
func TestCheckTransport(t *testing.T) {
	clk := &clock{t: time.Now()}
	e := open(t, t.TempDir(), nil, clk, false)
	f := &fakeTransport{group: "G5"}
	remove := e.s.AddCheckTransport("fake", f)
	p5 := e.prepare("T5", 1, "G5", "five")
	p4 := e.prepare("T5", 0, "G4", "four")
	clk.add(time.Minute)
	e.s.CheckNow(context.Background())

	got := f.checks()
	require.Len(t, got, 1)
	c := got[0]
	assert.Equal(t, "G5", c.Group)
	assert.Equal(t, int32(1), c.Times)
	assert.Equal(t, "T5", c.Message.Topic, "under its real topic")
	assert.Equal(t, int32(1), c.Message.QueueID)
	assert.Equal(t, p5.QueueOffset, c.Message.QueueOffset, "the half message's offsets")
	assert.Equal(t, p5.CommitLogOffset, c.Message.CommitLogOffset)
	assert.Equal(t, "1", c.Message.Properties[message.PropertyTransactionCheckTimes])
	assert.Equal(t, "five", string(c.Message.Body))
	assert.Equal(t, 1, e.s.CheckTimes(p5.QueueOffset))
	assert.Equal(t, 0, e.s.CheckTimes(p4.QueueOffset), "declined, and no remoting producer of G4")

	ctx := context.Background()
	tests := []struct {
		name string
		give EndRequest
	}{
		{"wrong group", EndRequest{Group: "G4", QueueOffset: p5.QueueOffset, CommitLogOffset: p5.CommitLogOffset, Resolution: Commit}},
		{"wrong topic", EndRequest{Group: "G5", Topic: "Other", QueueOffset: p5.QueueOffset, CommitLogOffset: p5.CommitLogOffset, Resolution: Commit}},
		{"wrong queue offset", EndRequest{Group: "G5", QueueOffset: p4.QueueOffset, CommitLogOffset: p5.CommitLogOffset, Resolution: Commit}},
		{"not a half message", EndRequest{Group: "G5", QueueOffset: 0, CommitLogOffset: p5.CommitLogOffset + 1, Resolution: Commit}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := e.s.End(ctx, tt.give)
			assert.ErrorIs(t, err, ErrHalfNotFound)
		})
	}
	_, err := e.s.End(ctx, EndRequest{Group: "G5", QueueOffset: p5.QueueOffset, CommitLogOffset: p5.CommitLogOffset})
	assert.Error(t, err, "no resolution")
	assert.False(t, e.s.Decided(p5.QueueOffset), "refused ends decide nothing")

	dup, err := e.s.End(ctx, EndRequest{Group: "G5", Topic: "T5", QueueOffset: c.Message.QueueOffset, CommitLogOffset: c.Message.CommitLogOffset, Resolution: Commit, FromCheck: true})
	require.NoError(t, err)
	assert.False(t, dup)
	assert.True(t, e.s.Decided(p5.QueueOffset))
	dup, err = e.s.End(ctx, EndRequest{Group: "G5", QueueOffset: p5.QueueOffset, CommitLogOffset: p5.CommitLogOffset, Resolution: Rollback})
	require.NoError(t, err)
	assert.True(t, dup, "decided once")

	remove()
	p5b := e.prepare("T5", 1, "G5", "five again")
	clk.add(time.Minute)
	e.s.CheckNow(ctx)
	assert.Len(t, f.checks(), 1, "a removed transport is not asked")
	assert.Equal(t, 0, e.s.CheckTimes(p5b.QueueOffset))
}
