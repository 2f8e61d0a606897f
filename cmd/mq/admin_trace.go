package main

// mq admin message trace and mqadmin's queryMsgTraceById: a message's
// trace (its sends, consumes and their outcomes) read from the trace
// topic, as Java's QueryMsgTraceByIdSubCommand prints it.

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/quivermq/quiver/client"
	clientadmin "github.com/quivermq/quiver/client/admin"
	"github.com/quivermq/quiver/client/trace"
)

// traceMqadminCmds is mqadmin's queryMsgTraceById.
func traceMqadminCmds(run runner) []*cobra.Command {
	return []*cobra.Command{alias("queryMsgTraceById", "A message's trace: sends and consumes with their outcome (message trace)",
		func(c *cobra.Command) func(context.Context, *adm) error {
			var q clientadmin.TraceQuery
			c.Aliases = []string{"QueryMsgTraceById"} // mqadmin 4.9's name
			c.Flags().StringVarP(&q.MsgID, "msgId", "i", "", "Message Id (required)")
			c.Flags().StringVarP(&q.Topic, "traceTopic", "t", trace.DefaultTopic, "The name value of message trace topic")
			c.Flags().Int64VarP(&q.Begin, "beginTimestamp", "b", 0, "Begin timestamp(ms)")
			c.Flags().Int64VarP(&q.End, "endTimestamp", "e", 0, "End timestamp(ms); default: no bound")
			c.Flags().IntVarP(&q.MaxNum, "maxNum", "c", 64, "The maximum number of trace messages read per broker")
			_ = c.MarkFlagRequired("msgId")
			return func(ctx context.Context, a *adm) error { return a.traceJava(ctx, q) }
		}, run)}
}

// traceCmd is `mq admin message trace <msgId>`.
func traceCmd(run runner) *cobra.Command {
	var q clientadmin.TraceQuery
	c := &cobra.Command{
		Use:   "trace <msgId>",
		Short: "A message's trace: its sends and consumes, when, by whom, how long and with what outcome",
		Long: "A message's trace, read from the trace topic: the records clients with tracing on wrote for its\n" +
			"sends (Pub) and consumes (SubBefore, SubAfter), oldest first. The brokers need\n" +
			"broker.trace_topic_enable (or the trace topic created otherwise) and the clients tracing on.",
		Args: cobra.ExactArgs(1),
	}
	c.Flags().StringVar(&q.Topic, "trace-topic", trace.DefaultTopic, "the trace topic (broker.trace_topic_name)")
	c.Flags().IntVar(&q.MaxNum, "max", 64, "trace messages read per broker at most")
	c.RunE = func(cmd *cobra.Command, args []string) error {
		q.MsgID = args[0]
		return run(func(ctx context.Context, a *adm) error { return a.traceQuiver(ctx, q) })(cmd, args)
	}
	return c
}

// queryTrace reads a message's trace; none is an error, as in Java.
func (a *adm) queryTrace(ctx context.Context, q clientadmin.TraceQuery) ([]clientadmin.TraceRecord, error) {
	lib, err := a.library()
	if err != nil {
		return nil, err
	}
	recs, err := lib.QueryTraceBy(ctx, q)
	switch {
	case errors.Is(err, clientadmin.ErrBadMessageID):
		return nil, usageError{err}
	case errors.Is(err, client.ErrNoRoute):
		return nil, fmt.Errorf("trace topic %s has no route: no broker has broker.trace_topic_enable on (or the topic): %w", q.Topic, err)
	case err != nil:
		return nil, codeErr(err)
	case len(recs) == 0:
		return nil, fmt.Errorf("no trace of message %s in %s", q.MsgID, q.Topic)
	}
	return recs, nil
}

// traceQuiver prints every record, oldest first.
func (a *adm) traceQuiver(ctx context.Context, q clientadmin.TraceQuery) error {
	recs, err := a.queryTrace(ctx, q)
	if err != nil {
		return err
	}
	rows := make([][]string, 0, len(recs))
	for _, r := range recs {
		retries := ""
		if r.Type == trace.SubBefore {
			retries = strconv.Itoa(r.RetryTimes)
		}
		rows = append(rows, []string{string(r.Type), fmtMs(r.Timestamp), r.Group, r.ClientHost, i64(r.CostMs), r.Status,
			retries, r.Result, r.Topic})
	}
	return a.print(recs, "TYPE\tTIME\tGROUP\tCLIENT HOST\tCOST MS\tSTATUS\tRETRIES\tRESULT\tTOPIC", rows)
}

// traceJava prints as QueryMsgTraceByIdSubCommand.printMessageTrace: a
// table per Pub, then one per consumer group of its SubAfter records,
// Java's columns and widths, times in the local zone.
func (a *adm) traceJava(ctx context.Context, q clientadmin.TraceQuery) error {
	recs, err := a.queryTrace(ctx, q)
	if err != nil {
		return err
	}
	if a.opts.output == "json" {
		return a.print(recs, "", nil)
	}
	const row = "%-10s %-20s %-20s %-20s %-10s %-10s\n"
	when := func(ms int64) string { return time.UnixMilli(ms).Format(time.DateTime) }
	var groups []string
	subs := map[string][]clientadmin.TraceRecord{}
	for _, r := range recs {
		switch r.Type {
		case trace.Pub:
			fmt.Fprintf(a.w, row, "#Type", "#ProducerGroup", "#ClientHost", "#SendTime", "#CostTimes", "#Status")
			fmt.Fprintf(a.w, row, "Pub", r.Group, r.ClientHost, when(r.Timestamp), i64(r.CostMs)+"ms", r.Status)
			fmt.Fprintln(a.w)
		case trace.SubAfter:
			if _, ok := subs[r.Group]; !ok {
				groups = append(groups, r.Group)
			}
			subs[r.Group] = append(subs[r.Group], r)
		}
	}
	for _, g := range groups {
		fmt.Fprintf(a.w, row, "#Type", "#ConsumerGroup", "#ClientHost", "#ConsumerTime", "#CostTimes", "#Status")
		for _, r := range subs[g] {
			fmt.Fprintf(a.w, row, "Sub", r.Group, r.ClientHost, when(r.Timestamp), i64(r.CostMs)+"ms", r.Status)
		}
		fmt.Fprintln(a.w)
	}
	return nil
}
