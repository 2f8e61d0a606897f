package main

// mq admin acl whitelist: which addresses bypass signature checks on each
// broker (GET_BROKER_CLUSTER_ACL_CONFIG), a read-only listing.

import (
	"context"
	"sort"

	"github.com/spf13/cobra"
)

// whiteEntry is one address pattern that bypasses signatures.
type whiteEntry struct {
	Broker string `json:"broker"`
	// Scope is "global" (globalWhiteRemoteAddresses: every check skipped)
	// or "account <accessKey>" (its whiteRemoteAddress: that account's
	// signature and permissions skipped).
	Scope   string `json:"scope"`
	Pattern string `json:"pattern"`
}

func aclWhitelistCmd(run runner) *cobra.Command {
	var addr string
	cmd := &cobra.Command{
		Use:   "whitelist",
		Short: "Addresses that bypass ACL signature checks on each broker (GET_BROKER_CLUSTER_ACL_CONFIG; admin account); every master without --broker",
		Args:  cobra.NoArgs,
		RunE: run(func(ctx context.Context, a *adm) error {
			addrs := []string{addr}
			if addr == "" {
				ms, err := a.masters(ctx)
				if err != nil {
					return err
				}
				addrs = addrs[:0]
				for _, m := range ms {
					addrs = append(addrs, m.Addr)
				}
			}
			lib, err := a.library()
			if err != nil {
				return err
			}
			out := []whiteEntry{}
			for _, ad := range addrs {
				cfg, err := lib.ACLConfig(ctx, ad)
				if err != nil {
					return err
				}
				for _, p := range cfg.GlobalWhiteAddrs {
					out = append(out, whiteEntry{Broker: ad, Scope: "global", Pattern: p})
				}
				accts := cfg.PlainAccessConfigs
				sort.Slice(accts, func(i, j int) bool { return accts[i].AccessKey < accts[j].AccessKey })
				for _, ac := range accts {
					if ac.WhiteRemoteAddress != "" {
						out = append(out, whiteEntry{Broker: ad, Scope: "account " + ac.AccessKey, Pattern: ac.WhiteRemoteAddress})
					}
				}
			}
			rows := make([][]string, 0, len(out))
			for _, e := range out {
				rows = append(rows, []string{e.Broker, e.Scope, e.Pattern})
			}
			return a.print(out, "BROKER\tSCOPE\tPATTERN", rows)
		}),
	}
	cmd.Flags().StringVar(&addr, "broker", "", "broker address (default: every master)")
	return cmd
}
