package controller

import (
	"bytes"
	"encoding/json"
	"io"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func entry(t *testing.T, c Command) *raft.Log {
	t.Helper()
	b, err := json.Marshal(c)
	require.NoError(t, err)
	return &raft.Log{Data: b}
}

func TestFSMEpochs(t *testing.T) {
	var changed []*Group
	f := NewFSM(func(g *Group) { changed = append(changed, g) })
	tests := []struct {
		name      string
		give      Command
		wantErr   bool
		wantEpoch int64
		wantAddr  string
		wantReady bool
	}{
		{"founder", Command{Op: opElect, Name: "b", Epoch: 0, MasterID: 0, MasterAddr: "m:1", Start: 0, Ready: true, Sync: true}, false, 1, "m:1", true},
		{"second founder is stale", Command{Op: opElect, Name: "b", Epoch: 0, MasterID: 1, MasterAddr: "s:1", Ready: true}, true, 1, "m:1", true},
		{"in-sync", Command{Op: opInSync, Name: "b", Epoch: 1, InSync: []int64{2, 1}, Sync: true}, false, 1, "m:1", true},
		{"election", Command{Op: opElect, Name: "b", Epoch: 1, MasterID: 1, MasterAddr: "s:1"}, false, 2, "s:1", false},
		{"a concurrent election of the same epoch is void", Command{Op: opElect, Name: "b", Epoch: 1, MasterID: 2, MasterAddr: "s:2"}, true, 2, "s:1", false},
		{"stale in-sync", Command{Op: opInSync, Name: "b", Epoch: 1, InSync: []int64{0}}, true, 2, "s:1", false},
		{"start", Command{Op: opStart, Name: "b", Epoch: 2, Start: 4096}, false, 2, "s:1", true},
		{"start twice", Command{Op: opStart, Name: "b", Epoch: 2, Start: 9999}, true, 2, "s:1", true},
		{"unknown op", Command{Op: "nope", Name: "b", Epoch: 2}, true, 2, "s:1", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := f.Apply(entry(t, tt.give))
			_, isErr := res.(error)
			assert.Equal(t, tt.wantErr, isErr, "%v", res)
			g := f.Group("b")
			require.NotNil(t, g)
			assert.Equal(t, tt.wantEpoch, g.Epoch)
			assert.Equal(t, tt.wantAddr, g.MasterAddr)
			assert.Equal(t, tt.wantReady, g.Ready())
		})
	}
	g := f.Group("b")
	assert.Equal(t, []int64{2}, g.InSync, "the elected slave leaves the in-sync set, the other stays a candidate")
	assert.Equal(t, []EpochStart{{1, 0}, {2, 4096}}, g.Epochs)
	assert.True(t, g.Sync)
	assert.Len(t, changed, 4, "only effective entries reach onChange")

	off, ok := g.CutAfter(1)
	assert.True(t, ok)
	assert.Equal(t, int64(4096), off, "a broker of epoch 1 cuts at epoch 2's start")
	_, ok = g.CutAfter(2)
	assert.False(t, ok, "nothing to cut for the current epoch")

	// Snapshot and restore give the same state.
	snap, err := f.Snapshot()
	require.NoError(t, err)
	sink := &memSink{}
	require.NoError(t, snap.Persist(sink))
	f2 := NewFSM(nil)
	require.NoError(t, f2.Restore(io.NopCloser(bytes.NewReader(sink.Bytes()))))
	assert.Equal(t, f.Groups(), f2.Groups())
}

func TestFSMEpochHistoryBounded(t *testing.T) {
	f := NewFSM(nil)
	require.NotNil(t, f.Apply(entry(t, Command{Op: opElect, Name: "b", MasterAddr: "a", Ready: true})))
	for e := int64(1); e < 100; e++ {
		_, isErr := f.Apply(entry(t, Command{Op: opElect, Name: "b", Epoch: e, MasterID: e % 2, MasterAddr: "a"})).(error)
		require.False(t, isErr)
	}
	g := f.Group("b")
	assert.Equal(t, int64(100), g.Epoch)
	assert.Len(t, g.Epochs, maxEpochHistory)
	assert.Equal(t, int64(100), g.Epochs[len(g.Epochs)-1].Epoch)
}

func TestDecide(t *testing.T) {
	now := time.Unix(1000, 0)
	ft := 5 * time.Second
	g := &Group{Name: "b", Epoch: 3, MasterID: 0, MasterAddr: "m", InSync: []int64{1, 2}, FailoverTimeout: ft,
		Epochs: []EpochStart{{3, 100}}}
	hb := func(id, epoch, off int64, age time.Duration, master bool, in ...int64) beat {
		addr := map[int64]string{0: "m", 1: "s1", 2: "s2"}[id]
		return beat{hb: HeartbeatBody{Name: "b", MemberID: id, Addr: addr, Epoch: epoch, Offset: off, Master: master, InSync: in}, at: now.Add(-age)}
	}
	long := now.Add(-time.Hour)
	tests := []struct {
		name   string
		beats  []beat
		since  time.Time
		wantOK bool
		want   Command
	}{
		{"master alive, same in-sync: nothing", []beat{hb(0, 3, 500, time.Second, true, 1, 2), hb(1, 3, 500, 0, false)}, long, false, Command{}},
		{"master alive, in-sync changed", []beat{hb(0, 3, 500, time.Second, true, 2)}, long, true,
			Command{Op: opInSync, Name: "b", Epoch: 3, InSync: []int64{2}}},
		{"master lapsed: best offset wins", []beat{hb(0, 3, 500, 6*time.Second, true), hb(1, 3, 400, 0, false), hb(2, 3, 450, 0, false)}, long, true,
			Command{Op: opElect, Name: "b", Epoch: 3, MasterID: 2, MasterAddr: "s2"}},
		{"master lapsed: tie goes to the lowest id", []beat{hb(1, 3, 450, 0, false), hb(2, 3, 450, 0, false)}, long, true,
			Command{Op: opElect, Name: "b", Epoch: 3, MasterID: 1, MasterAddr: "s1"}},
		{"master lapsed: a dead slave is no candidate", []beat{hb(1, 3, 900, 10*time.Second, false), hb(2, 3, 450, 0, false)}, long, true,
			Command{Op: opElect, Name: "b", Epoch: 3, MasterID: 2, MasterAddr: "s2"}},
		{"master lapsed: a slave of an older epoch is no candidate", []beat{hb(1, 2, 900, 0, false)}, long, false, Command{}},
		{"master lapsed, no slave: no election", nil, long, false, Command{}},
		{"new leader waits a full timeout", []beat{hb(1, 3, 450, 0, false)}, now.Add(-time.Second), false, Command{}},
		{"an elected master that has not learned its epoch yet is alive", []beat{hb(0, 2, 500, 0, false), hb(1, 3, 450, 0, false)}, long, false, Command{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := map[int64]beat{}
			for _, b := range tt.beats {
				m[b.hb.MemberID] = b
			}
			got, ok := decide(g, m, tt.since, now, ft)
			assert.Equal(t, tt.wantOK, ok)
			if tt.wantOK {
				assert.Equal(t, tt.want, got)
			}
		})
	}
}

type memSink struct{ bytes.Buffer }

func (*memSink) ID() string    { return "mem" }
func (*memSink) Cancel() error { return nil }
func (*memSink) Close() error  { return nil }
