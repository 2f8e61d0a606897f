package main

// mq admin mirror status and dedup: the mirror links that write into this
// cluster, read from their checkpoints (modules/mirror keeps them in the
// target, topic MIRROR_CHECKPOINT_<link>), so it works whether or not the
// mirror process is up, and the target brokers' dedup windows (runtime
// info). The console's Mirror page (console_mirror.go) shows the same
// report: mirrorLinks and mirrorDedup are its one source.

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/quivermq/quiver/modules/mirror"
)

func mirrorCmds(run runner) []*cobra.Command {
	cmd := &cobra.Command{Use: "mirror", Short: "Mirror links writing into this cluster (--namesrv is the target's)"}
	var queues bool
	status := &cobra.Command{
		Use:   "status [LINK...]",
		Short: "Each link's state at its last checkpoint: state, messages mirrored, lag, throughput, checkpoint age (every link without arguments)",
		Args:  cobra.ArbitraryArgs,
	}
	status.RunE = func(c *cobra.Command, args []string) error {
		return run(func(ctx context.Context, a *adm) error { return a.mirrorStatus(ctx, args, queues) })(c, args)
	}
	status.Flags().BoolVar(&queues, "queues", false, "one row per source queue")
	dedup := &cobra.Command{
		Use:   "dedup",
		Short: "Each master's windows of mirrored message ids: topics, ids held, copies refused",
		Args:  cobra.NoArgs,
	}
	dedup.RunE = func(c *cobra.Command, args []string) error {
		return run(func(ctx context.Context, a *adm) error { return a.mirrorDedupStatus(ctx) })(c, args)
	}
	cmd.AddCommand(status, dedup)
	return []*cobra.Command{cmd}
}

// mirrorLinkView is one link in `mirror status` and the console.
type mirrorLinkView struct {
	Link          string `json:"link"`
	SourceCluster string `json:"sourceCluster"`
	TargetCluster string `json:"targetCluster"`
	// Source and Target are the name servers the link was given.
	Source string `json:"source,omitempty"`
	Target string `json:"target,omitempty"`
	Up     bool   `json:"up"`
	// State is the link's state (modules/mirror's State constants): the
	// checkpoint's, or cut when the checkpoint is overdue. Down names the
	// failing end.
	State       string `json:"state"`
	Down        string `json:"down,omitempty"`
	CatchUp     string `json:"catchUp,omitempty"`
	Mirrored    int64  `json:"mirrored"`
	LagMessages int64  `json:"lagMessages"`
	// Rate and ByteRate are messages and bytes written per second over
	// the 10 s before the checkpoint.
	Rate           float64              `json:"rate"`
	ByteRate       float64              `json:"byteRate"`
	CheckpointTime int64                `json:"checkpointTime"`
	CheckpointAge  float64              `json:"checkpointAgeSeconds"`
	Reconnects     int64                `json:"reconnects"`
	LastError      string               `json:"lastError,omitempty"`
	Topics         []mirror.TopicStatus `json:"topics,omitempty"`
	Queues         []mirrorQueueView    `json:"queues,omitempty"`
}

// mirrorQueueView is one source queue of a link: its checkpoint and lag.
type mirrorQueueView struct {
	mirror.QueueCkpt
	Lag int64 `json:"lag"`
}

// mirrorLinks reads the checkpoints of links (every link writing here
// when empty) as of now; perQueue adds the queues.
func (a *adm) mirrorLinks(ctx context.Context, links []string, perQueue bool) ([]mirrorLinkView, error) {
	lib, err := a.library()
	if err != nil {
		return nil, err
	}
	if len(links) == 0 {
		topics, err := lib.Topics(ctx)
		if err != nil {
			return nil, err
		}
		for _, t := range topics {
			if name, ok := strings.CutPrefix(t, "MIRROR_CHECKPOINT_"); ok {
				links = append(links, name)
			}
		}
	}
	sort.Strings(links)
	views := []mirrorLinkView{} // JSON [] when no link writes here, not null
	now := time.Now()
	for _, name := range links {
		s, err := mirror.ReadCheckpoint(ctx, a.cl, name)
		if err != nil {
			return nil, fmt.Errorf("link %s: %w", name, err)
		}
		if s == nil {
			return nil, codeErr(fmt.Errorf("no checkpoint of mirror link %s in this cluster (is it the link's target?)", name))
		}
		v := mirrorLinkView{Link: name, SourceCluster: s.SourceCluster, TargetCluster: s.TargetCluster, Mirrored: s.Mirrored,
			State: s.StateAt(now), CheckpointTime: s.Time, CheckpointAge: now.Sub(time.UnixMilli(s.Time)).Seconds()}
		if st := s.Status; st != nil {
			v.Source, v.Target, v.Up, v.Reconnects, v.LastError = st.Source, st.Target, st.Up, st.Reconnects, st.LastError
			v.Down, v.CatchUp, v.Rate, v.ByteRate, v.Topics = st.Down, st.CatchUp, st.Rate, st.ByteRate, st.Topics
		}
		if v.State == mirror.StateCut {
			v.Up = false
		}
		for _, q := range s.Queues {
			v.LagMessages += q.Lag()
			if perQueue {
				v.Queues = append(v.Queues, mirrorQueueView{QueueCkpt: q, Lag: q.Lag()})
			}
		}
		views = append(views, v)
	}
	return views, nil
}

func (a *adm) mirrorStatus(ctx context.Context, links []string, perQueue bool) error {
	cctx, cancel := context.WithTimeout(ctx, a.timeout)
	defer cancel()
	views, err := a.mirrorLinks(cctx, links, perQueue)
	if err != nil {
		return err
	}
	var rows [][]string
	for _, v := range views {
		if perQueue {
			for _, q := range v.Queues {
				rows = append(rows, []string{v.Link, q.Topic, q.Broker, strconv.Itoa(q.Queue), strconv.FormatInt(q.Next, 10),
					strconv.FormatInt(q.MaxOffset, 10), strconv.FormatInt(q.Lag, 10), q.DstBroker, strconv.Itoa(q.DstQueue)})
			}
			continue
		}
		rows = append(rows, []string{v.Link, v.SourceCluster + " -> " + v.TargetCluster, v.State, strconv.FormatBool(v.Up), strconv.FormatInt(v.Mirrored, 10),
			strconv.FormatInt(v.LagMessages, 10), fmt.Sprintf("%.1f/s", v.Rate), fmt.Sprintf("%.1fs", v.CheckpointAge), strconv.FormatInt(v.Reconnects, 10), v.LastError})
	}
	if perQueue {
		return a.print(views, "LINK\tTOPIC\tBROKER\tQUEUE\tNEXT\tMAX OFFSET\tLAG\tTARGET BROKER\tTARGET QUEUE", rows)
	}
	return a.print(views, "LINK\tCLUSTERS\tSTATE\tUP\tMIRRORED\tLAG\tRATE\tCHECKPOINT AGE\tRECONNECTS\tLAST ERROR", rows)
}

// mirrorDedupView is one master's dedup windows (runtime info's
// quiverMirrorDedup* keys).
type mirrorDedupView struct {
	Broker  string `json:"broker"`
	Addr    string `json:"addr"`
	Windows int64  `json:"windows"`
	IDs     int64  `json:"ids"`
	// Capacity is the ids a window holds at most (per topic).
	Capacity int64 `json:"capacity"`
	Refused  int64 `json:"refused"`
}

// mirrorDedup reads every master's dedup windows.
func (a *adm) mirrorDedup(ctx context.Context) ([]mirrorDedupView, error) {
	ms, err := a.masters(ctx)
	if err != nil {
		return nil, err
	}
	out := []mirrorDedupView{}
	for _, m := range ms {
		ri, err := a.runtimeInfo(ctx, m.Addr)
		if err != nil {
			return nil, fmt.Errorf("broker %s: %w", m.Name, err)
		}
		n := func(k string) int64 { v, _ := strconv.ParseInt(ri[k], 10, 64); return v }
		out = append(out, mirrorDedupView{Broker: m.Name, Addr: m.Addr, Windows: n("quiverMirrorDedupWindows"), IDs: n("quiverMirrorDedupIds"),
			Capacity: n("quiverMirrorDedupCapacity"), Refused: n("quiverMirrorDedupRefused")})
	}
	return out, nil
}

func (a *adm) mirrorDedupStatus(ctx context.Context) error {
	cctx, cancel := context.WithTimeout(ctx, a.timeout)
	defer cancel()
	ds, err := a.mirrorDedup(cctx)
	if err != nil {
		return err
	}
	var rows [][]string
	for _, d := range ds {
		rows = append(rows, []string{d.Broker, d.Addr, strconv.FormatInt(d.Windows, 10), strconv.FormatInt(d.IDs, 10),
			strconv.FormatInt(d.Capacity, 10), strconv.FormatInt(d.Refused, 10)})
	}
	return a.print(ds, "BROKER\tADDRESS\tTOPICS\tIDS HELD\tCAPACITY PER TOPIC\tCOPIES REFUSED", rows)
}
