package main

// mq admin acl account update/delete, acl global-white-addrs, acl
// version, acl config: the ACL admin codes 50-54 on every master (or
// --broker / --cluster), through client/admin. The caller signs as an
// admin account with --access-key/--secret-key.

import (
	"context"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	clientadmin "github.com/quivermq/quiver/client/admin"
	"github.com/quivermq/quiver/core/protocol"
)

// aclAccountFlags are the fields of an account to create or update.
type aclAccountFlags struct {
	broker, cluster                  string
	ac                               clientadmin.AccessConfig
	topicPerms, groupPerms, adminArg string
}

func (f *aclAccountFlags) bind(c *cobra.Command, short bool) {
	fs := c.Flags()
	if short { // mqadmin updateAclConfig
		fs.StringVarP(&f.broker, "broker", "b", "", "broker address (default: every master)")
		fs.StringVarP(&f.cluster, "cluster", "c", "", "the masters and slaves of this cluster")
		fs.StringVarP(&f.ac.AccessKey, "account", "a", "", "the account's access key (required)")
		fs.StringVarP(&f.ac.SecretKey, "account-secret", "s", "", "the account's secret key")
		fs.StringVarP(&f.ac.WhiteRemoteAddress, "white-addr", "w", "", "addresses whose requests skip the account's signature check")
		fs.StringVarP(&f.ac.DefaultTopicPerm, "default-topic-perm", "i", "", "DENY, PUB, SUB or PUB|SUB")
		fs.StringVarP(&f.ac.DefaultGroupPerm, "default-group-perm", "u", "", "DENY, PUB, SUB or PUB|SUB")
		fs.StringVarP(&f.topicPerms, "topic-perms", "t", "", "topic=PERM,... ")
		fs.StringVarP(&f.groupPerms, "group-perms", "g", "", "group=PERM,...")
		fs.StringVarP(&f.adminArg, "admin", "m", "false", "an admin account (true/false)")
	} else {
		fs.StringVar(&f.broker, "broker", "", "broker address (default: every master)")
		fs.StringVar(&f.cluster, "cluster", "", "the masters and slaves of this cluster")
		fs.StringVar(&f.ac.AccessKey, "account", "", "the account's access key (required)")
		fs.StringVar(&f.ac.SecretKey, "account-secret", "", "the account's secret key")
		fs.StringVar(&f.ac.WhiteRemoteAddress, "white-addr", "", "addresses whose requests skip the account's signature check")
		fs.StringVar(&f.ac.DefaultTopicPerm, "default-topic-perm", "", "DENY, PUB, SUB or PUB|SUB")
		fs.StringVar(&f.ac.DefaultGroupPerm, "default-group-perm", "", "DENY, PUB, SUB or PUB|SUB")
		fs.StringVar(&f.topicPerms, "topic-perms", "", "topic=PERM,...")
		fs.StringVar(&f.groupPerms, "group-perms", "", "group=PERM,...")
		fs.StringVar(&f.adminArg, "admin", "false", "an admin account (true/false)")
	}
	_ = c.MarkFlagRequired("account")
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func (a *adm) aclUpdate(ctx context.Context, f *aclAccountFlags) error {
	admin, err := strconv.ParseBool(f.adminArg)
	if err != nil {
		return usagef("--admin %q: want true or false", f.adminArg)
	}
	ac := f.ac
	ac.Admin, ac.TopicPerms, ac.GroupPerms = admin, splitList(f.topicPerms), splitList(f.groupPerms)
	return a.eachACLBroker(ctx, f.broker, f.cluster, "ACCOUNT", ac.AccessKey, func(lib *clientadmin.Admin, addr string) error {
		return lib.UpdateAccessConfig(ctx, addr, ac)
	})
}

// eachACLBroker runs f on every target broker and prints one row each.
// With a cluster, the targets are its masters and its slaves, as
// RocketMQ 4.9's ACL write commands (CommandUtil.
// fetchMasterAndSlaveAddrByClusterName): each broker keeps its own
// plain_acl.yml, which replication does not copy.
func (a *adm) eachACLBroker(ctx context.Context, broker, cluster, what, value string, f func(lib *clientadmin.Admin, addr string) error) error {
	addrs, err := a.brokerAddrs(ctx, broker, cluster)
	if err != nil {
		return err
	}
	if cluster != "" {
		all, err := a.brokers(ctx)
		if err != nil {
			return err
		}
		for _, b := range all {
			if b.Cluster == cluster && b.ID != protocol.MasterID && (broker == "" || b.Name == broker) {
				addrs = append(addrs, b.Addr)
			}
		}
	}
	lib, err := a.library()
	if err != nil {
		return err
	}
	out := []map[string]any{}
	var rows [][]string
	for _, ad := range addrs {
		if err := f(lib, ad); err != nil {
			return err
		}
		out = append(out, map[string]any{"broker": ad, strings.ToLower(what): value, "ok": true})
		rows = append(rows, []string{ad, value, "true"})
	}
	return a.print(out, "BROKER\t"+what+"\tOK", rows)
}

func (a *adm) aclVersion(ctx context.Context, broker, cluster string) error {
	addrs, err := a.brokerAddrs(ctx, broker, cluster)
	if err != nil {
		return err
	}
	lib, err := a.library()
	if err != nil {
		return err
	}
	out := []*clientadmin.ACLVersion{}
	var rows [][]string
	for _, ad := range addrs {
		v, err := lib.ACLVersion(ctx, ad)
		if err != nil {
			return err
		}
		out = append(out, v)
		rows = append(rows, []string{v.ClusterName, v.BrokerName, v.BrokerAddr, i64(v.Counter), fmtMs(v.Timestamp)})
	}
	return a.print(out, "CLUSTER\tBROKER\tADDR\tVERSION\tUPDATED", rows)
}

func (a *adm) aclConfig(ctx context.Context, broker, cluster string) error {
	addrs, err := a.brokerAddrs(ctx, broker, cluster)
	if err != nil {
		return err
	}
	lib, err := a.library()
	if err != nil {
		return err
	}
	out := map[string]*clientadmin.ACLConfig{}
	var rows [][]string
	for _, ad := range addrs {
		cfg, err := lib.ACLConfig(ctx, ad)
		if err != nil {
			return err
		}
		out[ad] = cfg
		for _, acc := range cfg.PlainAccessConfigs {
			rows = append(rows, []string{ad, acc.AccessKey, strconv.FormatBool(acc.Admin), acc.WhiteRemoteAddress, acc.DefaultTopicPerm, acc.DefaultGroupPerm,
				strings.Join(acc.TopicPerms, ","), strings.Join(acc.GroupPerms, ",")})
		}
	}
	return a.print(out, "BROKER\tACCOUNT\tADMIN\tWHITE ADDR\tDEFAULT TOPIC\tDEFAULT GROUP\tTOPIC PERMS\tGROUP PERMS", rows)
}

// aclAdminCmds are acl account-update, account-delete, global-white-addrs,
// version and config.
func aclAdminCmds(run runner) []*cobra.Command {
	uf := &aclAccountFlags{}
	upd := &cobra.Command{Use: "account-update", Short: "Create or update an account on the brokers (UPDATE_AND_CREATE_ACL_CONFIG)", Args: cobra.NoArgs,
		RunE: run(func(ctx context.Context, a *adm) error { return a.aclUpdate(ctx, uf) })}
	uf.bind(upd, false)
	var broker, cluster, account, addrs string
	del := &cobra.Command{Use: "account-delete", Short: "Delete an account on the brokers (DELETE_ACL_CONFIG)", Args: cobra.NoArgs,
		RunE: run(func(ctx context.Context, a *adm) error {
			return a.eachACLBroker(ctx, broker, cluster, "ACCOUNT", account, func(lib *clientadmin.Admin, addr string) error {
				return lib.DeleteAccessConfig(ctx, addr, account)
			})
		})}
	del.Flags().StringVar(&account, "account", "", "access key of the account (required)")
	_ = del.MarkFlagRequired("account")
	white := &cobra.Command{Use: "global-white-addrs", Short: "Replace the global white list (UPDATE_GLOBAL_WHITE_ADDRS_CONFIG)", Args: cobra.NoArgs,
		RunE: run(func(ctx context.Context, a *adm) error {
			return a.eachACLBroker(ctx, broker, cluster, "WHITE ADDRS", addrs, func(lib *clientadmin.Admin, addr string) error {
				return lib.UpdateGlobalWhiteAddrs(ctx, addr, splitList(addrs))
			})
		})}
	white.Flags().StringVar(&addrs, "addrs", "", "comma-separated address patterns (required)")
	_ = white.MarkFlagRequired("addrs")
	version := &cobra.Command{Use: "version", Short: "The ACL data version of each broker (GET_BROKER_CLUSTER_ACL_INFO)", Args: cobra.NoArgs,
		RunE: run(func(ctx context.Context, a *adm) error { return a.aclVersion(ctx, broker, cluster) })}
	cfg := &cobra.Command{Use: "config", Short: "The accounts of each broker's ACL file (GET_BROKER_CLUSTER_ACL_CONFIG)", Args: cobra.NoArgs,
		RunE: run(func(ctx context.Context, a *adm) error { return a.aclConfig(ctx, broker, cluster) })}
	for _, c := range []*cobra.Command{del, white, version, cfg} {
		c.Flags().StringVar(&broker, "broker", "", "broker address (default: every master)")
		c.Flags().StringVar(&cluster, "cluster", "", "this cluster's brokers (writes: masters and slaves, as mqadmin; reads: masters)")
	}
	return []*cobra.Command{upd, del, white, version, cfg}
}
