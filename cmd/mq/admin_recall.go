package main

// mq admin message recall: take back a timer message by its recall handle
// (RECALL_MESSAGE), as RocketMQ 5.3's producer recallMessage does.

import (
	"context"

	"github.com/spf13/cobra"
)

func recallCmd(run runner) *cobra.Command {
	var topic, handle, group string
	c := &cobra.Command{
		Use:   "recall",
		Short: "Recall a timer message before its delivery time by the recall handle its send answered (RECALL_MESSAGE)",
		Args:  cobra.NoArgs,
		RunE:  run(func(ctx context.Context, a *adm) error { return a.recall(ctx, group, topic, handle) }),
	}
	c.Flags().StringVar(&topic, "topic", "", "the message's topic (required)")
	c.Flags().StringVar(&handle, "handle", "", "the recall handle (`message send`'s RECALL HANDLE, SendResult.RecallHandle) (required)")
	c.Flags().StringVar(&group, "group", "TOOLS_PRODUCER", "producer group the request names")
	for _, f := range []string{"topic", "handle"} {
		_ = c.MarkFlagRequired(f)
	}
	return c
}

func (a *adm) recall(ctx context.Context, group, topic, handle string) error {
	lib, err := a.library()
	if err != nil {
		return err
	}
	id, err := lib.Recall(ctx, group, topic, handle)
	if err != nil {
		return codeErr(err)
	}
	return a.print(map[string]any{"topic": topic, "msgId": id}, "TOPIC\tMSG ID", [][]string{{topic, id}})
}
