package main

import (
	"context"
	"fmt"
	"sort"
	"strconv"

	"github.com/spf13/cobra"
)

func clusterCmd(run runner) *cobra.Command {
	cmd := &cobra.Command{Use: "cluster", Short: "Clusters and their brokers"}
	cmd.AddCommand(&cobra.Command{
		Use: "list", Short: "List clusters, brokers and their traffic (GET_BROKER_CLUSTER_INFO, GET_BROKER_RUNTIME_INFO)", Args: cobra.NoArgs,
		RunE: run(func(ctx context.Context, a *adm) error { return a.clusterList(ctx, "") }),
	})
	return cmd
}

func (a *adm) clusterList(ctx context.Context, cluster string) error {
	all, err := a.brokers(ctx)
	if err != nil {
		return err
	}
	var bs []brokerInfo
	for _, b := range all {
		if cluster == "" || b.Cluster == cluster {
			bs = append(bs, b)
		}
	}
	if len(bs) == 0 && cluster != "" {
		return fmt.Errorf("cluster %s has no registered broker", cluster)
	}
	type row struct {
		brokerInfo
		Version  string `json:"version"`
		InTotal  string `json:"msgPutTotal"`
		OutTotal string `json:"msgGetTotal"`
	}
	var out []row
	var rows [][]string
	for _, b := range bs {
		r := row{brokerInfo: b}
		if rt, err := a.runtimeInfo(ctx, b.Addr); err == nil {
			r.Version, r.InTotal, r.OutTotal = rt["brokerVersionDesc"], rt["msgPutTotalTodayNow"], rt["msgGetTotalTodayNow"]
		}
		out = append(out, r)
		rows = append(rows, []string{b.Cluster, b.Name, strconv.FormatInt(b.ID, 10), b.Addr, r.Version, r.InTotal, r.OutTotal})
	}
	return a.print(out, "CLUSTER\tBROKER\tID\tADDR\tVERSION\tIN TOTAL\tOUT TOTAL", rows)
}

func brokerStatusCmd(run runner) *cobra.Command {
	cmd := &cobra.Command{Use: "broker", Short: "Brokers"}
	var addr string
	status := &cobra.Command{
		Use: "status", Short: "A broker's runtime figures (GET_BROKER_RUNTIME_INFO); every master without --broker", Args: cobra.NoArgs,
		RunE: run(func(ctx context.Context, a *adm) error { return a.brokerStatus(ctx, addr, "") }),
	}
	status.Flags().StringVar(&addr, "broker", "", "broker address (default: every master)")
	cmd.AddCommand(append([]*cobra.Command{status}, brokerOpsCmds(run)...)...)
	return cmd
}

func (a *adm) brokerStatus(ctx context.Context, addr, cluster string) error {
	addrs, err := a.brokerAddrs(ctx, addr, cluster)
	if err != nil {
		return err
	}
	out := map[string]map[string]string{}
	var rows [][]string
	for _, ad := range addrs {
		rt, err := a.runtimeInfo(ctx, ad)
		if err != nil {
			return err
		}
		out[ad] = rt
		keys := make([]string, 0, len(rt))
		for k := range rt {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			rows = append(rows, []string{ad, k, rt[k]})
		}
	}
	return a.print(out, "BROKER\tKEY\tVALUE", rows)
}
