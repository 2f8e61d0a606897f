package main

// mq admin mirror status: the mirror links that write into this cluster,
// read from their checkpoints (modules/mirror keeps them in the target,
// topic MIRROR_CHECKPOINT_<link>), so it works whether or not the mirror
// process is up.

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
		Short: "Each link's state at its last checkpoint: up, messages mirrored, lag, checkpoint age (every link without arguments)",
		Args:  cobra.ArbitraryArgs,
	}
	status.RunE = func(c *cobra.Command, args []string) error {
		return run(func(ctx context.Context, a *adm) error { return a.mirrorStatus(ctx, args, queues) })(c, args)
	}
	status.Flags().BoolVar(&queues, "queues", false, "one row per source queue")
	cmd.AddCommand(status)
	return []*cobra.Command{cmd}
}

// mirrorLinkView is one link in `mirror status`.
type mirrorLinkView struct {
	Link          string             `json:"link"`
	SourceCluster string             `json:"sourceCluster"`
	TargetCluster string             `json:"targetCluster"`
	Up            bool               `json:"up"`
	Mirrored      int64              `json:"mirrored"`
	LagMessages   int64              `json:"lagMessages"`
	CheckpointAge float64            `json:"checkpointAgeSeconds"`
	Reconnects    int64              `json:"reconnects"`
	LastError     string             `json:"lastError,omitempty"`
	Queues        []mirror.QueueCkpt `json:"queues,omitempty"`
}

func (a *adm) mirrorStatus(ctx context.Context, links []string, perQueue bool) error {
	lib, err := a.library()
	if err != nil {
		return err
	}
	cctx, cancel := context.WithTimeout(ctx, a.timeout)
	defer cancel()
	if len(links) == 0 {
		topics, err := lib.Topics(cctx)
		if err != nil {
			return err
		}
		for _, t := range topics {
			if name, ok := strings.CutPrefix(t, "MIRROR_CHECKPOINT_"); ok {
				links = append(links, name)
			}
		}
	}
	sort.Strings(links)
	views := []mirrorLinkView{} // JSON [] when no link writes here, not null
	var rows [][]string
	for _, name := range links {
		s, err := mirror.ReadCheckpoint(cctx, a.cl, name)
		if err != nil {
			return fmt.Errorf("link %s: %w", name, err)
		}
		if s == nil {
			return codeErr(fmt.Errorf("no checkpoint of mirror link %s in this cluster (is it the link's target?)", name))
		}
		v := mirrorLinkView{Link: name, SourceCluster: s.SourceCluster, TargetCluster: s.TargetCluster, Mirrored: s.Mirrored,
			CheckpointAge: time.Since(time.UnixMilli(s.Time)).Seconds()}
		if s.Status != nil {
			v.Up, v.Reconnects, v.LastError = s.Status.Up, s.Status.Reconnects, s.Status.LastError
		}
		for _, q := range s.Queues {
			v.LagMessages += max(0, q.MaxOffset-q.Next)
		}
		if perQueue {
			v.Queues = s.Queues
			for _, q := range s.Queues {
				rows = append(rows, []string{name, q.Topic, q.Broker, strconv.Itoa(q.Queue), strconv.FormatInt(q.Next, 10),
					strconv.FormatInt(q.MaxOffset, 10), strconv.FormatInt(max(0, q.MaxOffset-q.Next), 10), q.DstBroker, strconv.Itoa(q.DstQueue)})
			}
		} else {
			rows = append(rows, []string{name, v.SourceCluster + " -> " + v.TargetCluster, strconv.FormatBool(v.Up), strconv.FormatInt(v.Mirrored, 10),
				strconv.FormatInt(v.LagMessages, 10), fmt.Sprintf("%.1fs", v.CheckpointAge), strconv.FormatInt(v.Reconnects, 10), v.LastError})
		}
		views = append(views, v)
	}
	if perQueue {
		return a.print(views, "LINK\tTOPIC\tBROKER\tQUEUE\tNEXT\tMAX OFFSET\tLAG\tTARGET BROKER\tTARGET QUEUE", rows)
	}
	return a.print(views, "LINK\tCLUSTERS\tUP\tMIRRORED\tLAG\tCHECKPOINT AGE\tRECONNECTS\tLAST ERROR", rows)
}
