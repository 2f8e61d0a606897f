package main

// mqadmin's command names with mqadmin's short flags, so that a runbook
// written for `sh mqadmin` runs as `mq admin`. Each alias calls the same
// code as the Quiver-named command; docs/guide/admin.md maps every
// mqadmin command to ours or says why it is absent.

import (
	"context"
	"fmt"
	"strconv"

	"github.com/spf13/cobra"

	clientadmin "github.com/quivermq/quiver/client/admin"
)

// boolArg is a boolean flag that takes its value as the next argument,
// as mqadmin's commons-cli options do (-o true), rather than pflag's
// -o=true.
type boolArg struct{ p *bool }

func (b boolArg) String() string {
	if b.p == nil {
		return "false"
	}
	return strconv.FormatBool(*b.p)
}

func (b boolArg) Set(s string) error {
	v, err := strconv.ParseBool(s)
	if err != nil {
		return fmt.Errorf("want true or false")
	}
	*b.p = v
	return nil
}

func (b boolArg) Type() string { return "true|false" }

// ignored adds mqadmin options Quiver accepts and has no use for.
func ignored(c *cobra.Command, short, name, why string) {
	var s string
	c.Flags().StringVarP(&s, name, short, "", "ignored: "+why)
}

// ignoredSwitch is ignored for an mqadmin option that takes no value
// (commons-cli hasArg false: topicRoute -l, resetOffsetByTime -c).
func ignoredSwitch(c *cobra.Command, short, name, why string) {
	var b bool
	c.Flags().BoolVarP(&b, name, short, false, "ignored: "+why)
}

// alias builds one mqadmin-named command.
func alias(use, short string, f func(c *cobra.Command) func(ctx context.Context, a *adm) error, run runner) *cobra.Command {
	c := &cobra.Command{Use: use, Short: short, Args: cobra.NoArgs}
	body := f(c)
	c.RunE = run(body)
	return c
}

func mqadminAliases(run runner) []*cobra.Command {
	var out []*cobra.Command
	add := func(cs ...*cobra.Command) { out = append(out, cs...) }

	// Topics.
	add(alias("updateTopic", "Create a topic or change the options given (topic create/update)", func(c *cobra.Command) func(context.Context, *adm) error {
		f := &topicFlags{}
		f.bind(c, true)
		c.Flags().Lookup("order").Value = boolArg{&f.order}
		c.Flags().Lookup("order").NoOptDefVal = ""
		ignored(c, "u", "unit", "unit mode is not supported")
		ignored(c, "s", "hasUnitSub", "unit mode is not supported")
		return func(ctx context.Context, a *adm) error { return a.upsertTopic(ctx, c, f, topicUpsert) }
	}, run))
	add(alias("deleteTopic", "Delete a topic (topic delete); never asks, as mqadmin", func(c *cobra.Command) func(context.Context, *adm) error {
		var topic, cluster string
		var yes bool
		c.Flags().StringVarP(&topic, "topic", "t", "", "topic (required)")
		c.Flags().StringVarP(&cluster, "cluster", "c", "", "cluster")
		c.Flags().BoolVar(&yes, "yes", false, "accepted; mqadmin's names never ask (--confirm asks)")
		_ = c.MarkFlagRequired("topic")
		return func(ctx context.Context, a *adm) error { return a.deleteTopic(ctx, c, topic, cluster, yes) }
	}, run))
	add(alias("topicList", "Every topic, one a line as mqadmin prints them; -c: cluster, topic and consuming groups", func(c *cobra.Command) func(context.Context, *adm) error {
		var withCluster bool
		c.Flags().BoolVarP(&withCluster, "clusterModel", "c", false, "print #Cluster Name, #Topic, #Consumer Group (a row per consuming group)")
		return func(ctx context.Context, a *adm) error { return a.mqadminTopicList(ctx, withCluster) }
	}, run))
	add(updateTopicPermCmd(run))
	for _, t := range []struct {
		use, short string
		f          func(a *adm, ctx context.Context, topic string) error
	}{
		{"topicStatus", "A topic's queue offsets as mqadmin prints them (topic status)", (*adm).mqadminTopicStatus},
		{"topicClusterList", "The clusters serving a topic, one a line (topic clusters)", (*adm).mqadminTopicClusters},
	} {
		add(alias(t.use, t.short, func(c *cobra.Command) func(context.Context, *adm) error {
			var topic string
			c.Flags().StringVarP(&topic, "topic", "t", "", "topic (required)")
			switch t.use {
			case "topicStatus":
				ignored(c, "c", "cluster", "LMQ parent topics are not supported")
			}
			_ = c.MarkFlagRequired("topic")
			return func(ctx context.Context, a *adm) error { return t.f(a, ctx, topic) }
		}, run))
	}
	add(alias("topicRoute", "A topic's route as JSON, or with -l a row per broker, as mqadmin prints it (topic route)", func(c *cobra.Command) func(context.Context, *adm) error {
		var topic string
		var list bool
		c.Flags().StringVarP(&topic, "topic", "t", "", "topic (required)")
		c.Flags().BoolVarP(&list, "list", "l", false, "a row per broker and the total")
		_ = c.MarkFlagRequired("topic")
		return func(ctx context.Context, a *adm) error { return a.mqadminTopicRoute(ctx, topic, list) }
	}, run))
	add(alias("updateOrderConf", "Get, put or delete a topic's global order config (kv ORDER_TOPIC_CONFIG)", func(c *cobra.Command) func(context.Context, *adm) error {
		var topic, conf, method string
		c.Flags().StringVarP(&topic, "topic", "t", "", "topic (required)")
		c.Flags().StringVarP(&conf, "orderConf", "v", "", "brokerName:queues;... (with -m put)")
		c.Flags().StringVarP(&method, "method", "m", "", "get, put or delete (required)")
		_ = c.MarkFlagRequired("topic")
		_ = c.MarkFlagRequired("method")
		return func(ctx context.Context, a *adm) error {
			f := &kvFlags{namespace: clientadmin.OrderTopicConfigNamespace, key: topic, value: conf}
			switch method {
			case "put":
				if conf == "" {
					return usagef("-m put needs -v brokerName:queues")
				}
				return a.kvPut(ctx, f)
			case "delete":
				return a.kvDelete(ctx, f)
			case "get":
				lib, err := a.library()
				if err != nil {
					return err
				}
				v, found, err := lib.KVConfig(ctx, f.namespace, topic)
				if err != nil {
					return err
				}
				if !found {
					return fmt.Errorf("topic %s has no order config", topic)
				}
				return a.print(kvRow{f.namespace, topic, v}, "NAMESPACE\tKEY\tVALUE", [][]string{{f.namespace, topic, v}})
			}
			return usagef("-m %q: want get, put or delete", method)
		}
	}, run))

	// Groups and consumers.
	add(alias("updateSubGroup", "Create a subscription group or change the options given (group create/update)", func(c *cobra.Command) func(context.Context, *adm) error {
		f := &groupFlags{}
		f.bind(c, true)
		for name, p := range map[string]*bool{"consume-enable": &f.consumeEnable, "consume-from-min": &f.fromMin, "broadcast": &f.broadcast, "orderly": &f.orderly} {
			c.Flags().Lookup(name).Value = boolArg{p}
			c.Flags().Lookup(name).NoOptDefVal = ""
		}
		ignored(c, "a", "notifyConsumerIdsChanged", "always true")
		return func(ctx context.Context, a *adm) error { return a.upsertGroup(ctx, c, f, topicUpsert) }
	}, run))
	add(alias("deleteSubGroup", "Delete a subscription group (group delete); never asks, as mqadmin", func(c *cobra.Command) func(context.Context, *adm) error {
		var group, cluster, broker string
		var yes bool
		c.Flags().StringVarP(&group, "groupName", "g", "", "consumer group (required)")
		c.Flags().StringVarP(&cluster, "cluster", "c", "", "cluster")
		c.Flags().StringVarP(&broker, "broker", "b", "", "accepted; the group is deleted where it exists")
		c.Flags().BoolVar(&yes, "yes", false, "accepted; mqadmin's names never ask (--confirm asks)")
		ignored(c, "r", "removeOffset", "offsets go with the group")
		_ = c.MarkFlagRequired("groupName")
		return func(ctx context.Context, a *adm) error { return a.deleteGroup(ctx, c, group, cluster, yes) }
	}, run))
	add(alias("consumerProgress", "A group's progress per queue (group status); every group's lag without -g", func(c *cobra.Command) func(context.Context, *adm) error {
		var group, topic string
		var showIP bool
		c.Flags().StringVarP(&group, "groupName", "g", "", "consumer group")
		c.Flags().VarP(boolArg{&showIP}, "showClientIP", "s", "add the #Client IP column (N/A: queue allocations are not read)")
		c.Flags().StringVarP(&topic, "topicName", "t", "", "only this topic (with -g)")
		ignored(c, "c", "cluster", "LMQ parent topics are not supported")
		return func(ctx context.Context, a *adm) error { return a.mqadminConsumerProgress(ctx, group, topic, showIP) }
	}, run))
	add(alias("consumerStatus", "Running info of a group's consumers (consumer status)", func(c *cobra.Command) func(context.Context, *adm) error {
		var group, client string
		var jstack bool
		c.Flags().StringVarP(&group, "consumerGroup", "g", "", "consumer group (required)")
		c.Flags().StringVarP(&client, "clientId", "i", "", "only this client")
		c.Flags().VarP(boolArg{&jstack}, "jstack", "s", "ask Java clients for thread stacks")
		ignored(c, "b", "brokerAddr", "the group's brokers are asked")
		_ = c.MarkFlagRequired("consumerGroup")
		return func(ctx context.Context, a *adm) error { return a.consumerStatus(ctx, group, client, jstack) }
	}, run))
	add(alias("consumerConnection", "A group's online consumers (consumer connections)", func(c *cobra.Command) func(context.Context, *adm) error {
		var group string
		c.Flags().StringVarP(&group, "consumerGroup", "g", "", "consumer group (required)")
		ignored(c, "b", "brokerAddr", "the group's brokers are asked")
		_ = c.MarkFlagRequired("consumerGroup")
		return func(ctx context.Context, a *adm) error { return a.mqadminConsumerConnection(ctx, group) }
	}, run))
	add(alias("getConsumerConfig", "A group's subscription config (consumer config)", func(c *cobra.Command) func(context.Context, *adm) error {
		var group string
		c.Flags().StringVarP(&group, "groupName", "g", "", "consumer group (required)")
		_ = c.MarkFlagRequired("groupName")
		return func(ctx context.Context, a *adm) error { return a.consumerConfig(ctx, group) }
	}, run))
	add(alias("producerConnection", "A producer group's connections (producer connections)", func(c *cobra.Command) func(context.Context, *adm) error {
		var group, topic string
		c.Flags().StringVarP(&group, "producerGroup", "g", "", "producer group (required)")
		c.Flags().StringVarP(&topic, "topic", "t", "", "topic (required)")
		_ = c.MarkFlagRequired("producerGroup")
		_ = c.MarkFlagRequired("topic")
		return func(ctx context.Context, a *adm) error { return a.producerConnections(ctx, group, topic) }
	}, run))
	add(alias("resetOffsetByTime", "Reset a group's offsets to a time (offset reset); never asks, as mqadmin", func(c *cobra.Command) func(context.Context, *adm) error {
		f := &resetFlags{java: true}
		f.bind(c, true)
		c.Flags().Lookup("force").Value = boolArg{&f.force}
		c.Flags().Lookup("force").NoOptDefVal = ""
		c.Flags().Lookup("yes").Usage = "accepted; mqadmin's names never ask (--confirm asks)"
		ignoredSwitch(c, "c", "cplus", "C++ clients are told like the others")
		var broker, queue, offset string
		c.Flags().StringVarP(&broker, "broker", "b", "", "with -q and -o: one queue to an offset (refused: not supported)")
		c.Flags().StringVarP(&queue, "queue", "q", "", "see -b")
		c.Flags().StringVarP(&offset, "offset", "o", "", "see -b")
		return func(ctx context.Context, a *adm) error {
			if broker != "" || queue != "" || offset != "" {
				return usagef("-b/-q/-o (one queue to an offset) is not supported; reset by time, or cloneGroupOffset from a group at the wanted place")
			}
			return a.runReset(ctx, c, f)
		}
	}, run))
	clone := cloneOffsetCmd(run, true)
	clone.Short = "Copy a group's offsets to another group (offset clone)"
	if v := clone.Flags().Lookup("offline"); v != nil {
		var offline bool
		v.Value, v.NoOptDefVal = boolArg{&offline}, ""
		clone.RunE = wrapOffline(clone, &offline, run)
	}
	add(clone)

	// Messages.
	add(alias("queryMsgById", "A message by msgId or offsetMsgId (message get)", func(c *cobra.Command) func(context.Context, *adm) error {
		var id, topic string
		c.Flags().StringVarP(&id, "msgId", "i", "", "msgId or offsetMsgId (required)")
		c.Flags().StringVarP(&topic, "topic", "t", "", "look a msgId up in this topic only")
		ignored(c, "g", "consumerGroup", "consuming directly is not offered here")
		ignored(c, "d", "clientId", "consuming directly is not offered here")
		ignored(c, "u", "unitName", "unit mode is not supported")
		ignored(c, "s", "sendMessage", "resending to a client is not offered here")
		ignored(c, "f", "bodyFormat", "the body is printed as text")
		ignored(c, "c", "cluster", "LMQ parent topics are not supported")
		_ = c.MarkFlagRequired("msgId")
		return func(ctx context.Context, a *adm) error { return a.getMessage(ctx, id, topic) }
	}, run))
	add(alias("queryMsgByUniqueKey", "A message by msgId (message get)", func(c *cobra.Command) func(context.Context, *adm) error {
		var id, topic string
		c.Flags().StringVarP(&id, "msgId", "i", "", "msgId (required)")
		c.Flags().StringVarP(&topic, "topic", "t", "", "topic")
		ignored(c, "g", "consumerGroup", "consuming directly is not offered here")
		ignored(c, "d", "clientId", "consuming directly is not offered here")
		ignoredSwitch(c, "a", "showAll", "every copy found is printed")
		ignored(c, "c", "cluster", "LMQ parent topics are not supported")
		_ = c.MarkFlagRequired("msgId")
		return func(ctx context.Context, a *adm) error { return a.getMessage(ctx, id, topic) }
	}, run))
	add(alias("queryMsgByKey", "Messages by key (message query)", func(c *cobra.Command) func(context.Context, *adm) error {
		var topic, key, begin, end string
		var maxNum int
		c.Flags().StringVarP(&topic, "topic", "t", "", "topic (required)")
		c.Flags().StringVarP(&key, "msgKey", "k", "", "key (required)")
		c.Flags().StringVarP(&begin, "beginTimestamp", "b", "0", "earliest store time")
		c.Flags().StringVarP(&end, "endTimestamp", "e", "", "latest store time")
		c.Flags().IntVarP(&maxNum, "maxNum", "m", 64, "at most this many per broker")
		ignored(c, "c", "cluster", "LMQ parent topics are not supported")
		_ = c.MarkFlagRequired("topic")
		_ = c.MarkFlagRequired("msgKey")
		return func(ctx context.Context, a *adm) error { return a.queryCmd(ctx, topic, key, begin, end, maxNum) }
	}, run))
	add(alias("queryMsgByOffset", "The message at a queue offset of one broker's queue", func(c *cobra.Command) func(context.Context, *adm) error {
		var topic, broker string
		var queue int
		var offset int64
		c.Flags().StringVarP(&topic, "topic", "t", "", "topic (required)")
		c.Flags().StringVarP(&broker, "brokerName", "b", "", "broker name (required)")
		c.Flags().IntVarP(&queue, "queueId", "i", 0, "queue id (required)")
		c.Flags().Int64VarP(&offset, "offset", "o", 0, "queue offset (required)")
		ignored(c, "f", "bodyFormat", "the body is printed as text")
		for _, n := range []string{"topic", "brokerName", "queueId", "offset"} {
			_ = c.MarkFlagRequired(n)
		}
		return func(ctx context.Context, a *adm) error { return a.messageAtOffset(ctx, topic, broker, queue, offset) }
	}, run))
	add(alias("sendMessage", "Send one message (message send)", func(c *cobra.Command) func(context.Context, *adm) error {
		f := &sendFlags{}
		f.bind(c, true)
		ignored(c, "m", "msgTraceEnable", "message traces are not written by this tool")
		return func(ctx context.Context, a *adm) error { return a.sendCmd(ctx, f) }
	}, run))
	add(alias("consumeMessage", "Read messages (message consume)", func(c *cobra.Command) func(context.Context, *adm) error {
		f := &msgConsumeFlags{}
		f.bind(c, true)
		return func(ctx context.Context, a *adm) error { return a.consumeCmd(ctx, f) }
	}, run))
	add(alias("checkMsgSendRT", "Time test sends to a topic (stats send-rt)", func(c *cobra.Command) func(context.Context, *adm) error {
		var topic string
		var amount, size int
		c.Flags().StringVarP(&topic, "topic", "t", "", "topic (required)")
		c.Flags().IntVarP(&amount, "amount", "a", 100, "messages")
		c.Flags().IntVarP(&size, "size", "s", 128, "body size")
		_ = c.MarkFlagRequired("topic")
		return func(ctx context.Context, a *adm) error { return a.sendRT(ctx, topic, amount, size) }
	}, run))
	add(alias("clusterRT", "Time test sends to each master (to its broker-name topic)", func(c *cobra.Command) func(context.Context, *adm) error {
		var cluster string
		var amount, size int
		c.Flags().StringVarP(&cluster, "cluster", "c", "", "only this cluster")
		c.Flags().IntVarP(&amount, "amount", "a", 100, "messages per broker")
		c.Flags().IntVarP(&size, "size", "s", 128, "body size")
		ignored(c, "p", "print log", "the table is printed once")
		ignored(c, "m", "machine room", "not used")
		ignored(c, "i", "interval", "runs once")
		return func(ctx context.Context, a *adm) error { return a.clusterRT(ctx, cluster, amount, size) }
	}, run))

	// Cluster, brokers, name servers.
	add(alias("clusterList", "Clusters and brokers with TPS as mqadmin prints them; -m: message totals of yesterday and today", func(c *cobra.Command) func(context.Context, *adm) error {
		var cluster string
		var more bool
		c.Flags().StringVarP(&cluster, "clusterName", "c", "", "only this cluster")
		c.Flags().BoolVarP(&more, "moreStats", "m", false, "#InTotalYest, #OutTotalYest, #InTotalToday, #OutTotalToday")
		ignored(c, "i", "interval", "runs once")
		return func(ctx context.Context, a *adm) error { return a.mqadminClusterList(ctx, cluster, more) }
	}, run))
	brokerSel := func(c *cobra.Command, broker, cluster *string) {
		c.Flags().StringVarP(broker, "brokerAddr", "b", "", "broker address")
		c.Flags().StringVarP(cluster, "clusterName", "c", "", "the masters of this cluster")
	}
	add(alias("brokerStatus", "A broker's runtime figures (broker status)", func(c *cobra.Command) func(context.Context, *adm) error {
		var broker, cluster string
		brokerSel(c, &broker, &cluster)
		return func(ctx context.Context, a *adm) error { return a.mqadminBrokerStatus(ctx, broker, cluster) }
	}, run))
	add(alias("getBrokerConfig", "A broker's settings (broker config)", func(c *cobra.Command) func(context.Context, *adm) error {
		var broker, cluster string
		brokerSel(c, &broker, &cluster)
		return func(ctx context.Context, a *adm) error { return a.mqadminBrokerConfig(ctx, broker, cluster) }
	}, run))
	add(alias("updateBrokerConfig", "Change a setting of running brokers (broker set-config)", func(c *cobra.Command) func(context.Context, *adm) error {
		var broker, cluster, key, value, all string
		brokerSel(c, &broker, &cluster)
		c.Flags().StringVarP(&key, "key", "k", "", "setting (required)")
		c.Flags().StringVarP(&value, "value", "v", "", "value (required)")
		c.Flags().StringVarP(&all, "updateAllBroker", "a", "", "with -c: slaves too (any value, as mqadmin)")
		_ = c.MarkFlagRequired("key")
		_ = c.MarkFlagRequired("value")
		return func(ctx context.Context, a *adm) error {
			if broker == "" && cluster == "" {
				return usagef("give -b brokerAddr or -c clusterName")
			}
			return a.mqadminUpdateBrokerConfig(ctx, broker, cluster, c.Flags().Changed("updateAllBroker"), key, value)
		}
	}, run))
	for _, wp := range []struct {
		use, short string
		wipe       bool
	}{{"wipeWritePerm", "Stop producers sending to a broker (broker wipe-write-perm)", true}, {"addWritePerm", "Let producers send to a broker again (broker add-write-perm)", false}} {
		add(alias(wp.use, wp.short, func(c *cobra.Command) func(context.Context, *adm) error {
			var name string
			c.Flags().StringVarP(&name, "brokerName", "b", "", "broker name (required)")
			_ = c.MarkFlagRequired("brokerName")
			return func(ctx context.Context, a *adm) error { return a.writePerm(ctx, name, wp.wipe) }
		}, run))
	}
	for _, cl := range []struct {
		use, short string
		unused     bool
	}{{"cleanExpiredCQ", "Drop expired consume queues (broker clean-expired-cq)", false}, {"cleanUnusedTopic", "Drop unused topics' queues (broker clean-unused-topics)", true}} {
		add(alias(cl.use, cl.short, func(c *cobra.Command) func(context.Context, *adm) error {
			var broker, cluster string
			brokerSel(c, &broker, &cluster)
			return func(ctx context.Context, a *adm) error { return a.clean(ctx, broker, cluster, cl.unused) }
		}, run))
	}
	add(alias("brokerConsumeStats", "Every group's lag on a broker (broker consume-stats)", func(c *cobra.Command) func(context.Context, *adm) error {
		var broker string
		var order bool
		c.Flags().StringVarP(&broker, "brokerAddr", "b", "", "broker address")
		c.Flags().VarP(boolArg{&order}, "order", "o", "only ordered topics")
		ignored(c, "t", "timeoutMillis", "--timeout applies")
		ignored(c, "l", "level", "every group is listed")
		return func(ctx context.Context, a *adm) error { return a.brokerConsumeStats(ctx, broker, order) }
	}, run))
	add(alias("statsAll", "Traffic per topic and group (stats all)", func(c *cobra.Command) func(context.Context, *adm) error {
		var topic string
		var active bool
		c.Flags().StringVarP(&topic, "topic", "t", "", "only this topic")
		c.Flags().BoolVarP(&active, "activeTopic", "a", false, "only topics with traffic")
		return func(ctx context.Context, a *adm) error { return a.statsAll(ctx, topic, active) }
	}, run))
	add(alias("getNamesrvConfig", "Every name server's settings (namesrv config)", func(c *cobra.Command) func(context.Context, *adm) error {
		return func(ctx context.Context, a *adm) error { return a.namesrvConfig(ctx) }
	}, run))
	add(alias("updateNamesrvConfig", "Change a name-server setting (namesrv set-config)", func(c *cobra.Command) func(context.Context, *adm) error {
		var key, value string
		c.Flags().StringVarP(&key, "key", "k", "", "setting (required)")
		c.Flags().StringVarP(&value, "value", "v", "", "value (required)")
		_ = c.MarkFlagRequired("key")
		_ = c.MarkFlagRequired("value")
		return func(ctx context.Context, a *adm) error { return a.updateNamesrvConfig(ctx, key, value) }
	}, run))
	add(alias("updateKvConfig", "Set a name-server KV entry (kv put)", func(c *cobra.Command) func(context.Context, *adm) error {
		f := &kvFlags{}
		f.bind(c, true, true)
		return func(ctx context.Context, a *adm) error { return a.kvPut(ctx, f) }
	}, run))
	add(alias("deleteKvConfig", "Remove a name-server KV entry (kv delete)", func(c *cobra.Command) func(context.Context, *adm) error {
		f := &kvFlags{}
		f.bind(c, true, false)
		return func(ctx context.Context, a *adm) error { return a.kvDelete(ctx, f) }
	}, run))

	// ACL.
	add(alias("updateAclConfig", "Create or update an ACL account (acl account-update)", func(c *cobra.Command) func(context.Context, *adm) error {
		f := &aclAccountFlags{}
		f.bind(c, true)
		return func(ctx context.Context, a *adm) error { return a.aclUpdate(ctx, f) }
	}, run))
	add(alias("deleteAclConfig", "Delete an ACL account (acl account-delete)", func(c *cobra.Command) func(context.Context, *adm) error {
		var broker, cluster, account string
		brokerSel(c, &broker, &cluster)
		c.Flags().StringVarP(&account, "accessKey", "a", "", "access key (required)")
		_ = c.MarkFlagRequired("accessKey")
		return func(ctx context.Context, a *adm) error {
			return a.eachACLBroker(ctx, broker, cluster, "ACCOUNT", account, func(lib *clientadmin.Admin, addr string) error {
				return lib.DeleteAccessConfig(ctx, addr, account)
			})
		}
	}, run))
	add(alias("updateGlobalWhiteAddr", "Replace the ACL global white list (acl global-white-addrs)", func(c *cobra.Command) func(context.Context, *adm) error {
		var broker, cluster, addrs string
		brokerSel(c, &broker, &cluster)
		c.Flags().StringVarP(&addrs, "globalWhiteRemoteAddresses", "g", "", "comma-separated patterns (required)")
		_ = c.MarkFlagRequired("globalWhiteRemoteAddresses")
		return func(ctx context.Context, a *adm) error {
			return a.eachACLBroker(ctx, broker, cluster, "WHITE ADDRS", addrs, func(lib *clientadmin.Admin, addr string) error {
				return lib.UpdateGlobalWhiteAddrs(ctx, addr, splitList(addrs))
			})
		}
	}, run))
	add(alias("clusterAclConfigVersion", "ACL data version per broker (acl version)", func(c *cobra.Command) func(context.Context, *adm) error {
		var broker, cluster string
		brokerSel(c, &broker, &cluster)
		return func(ctx context.Context, a *adm) error { return a.aclVersion(ctx, broker, cluster) }
	}, run))
	getACL := alias("getAclConfig", "ACL accounts per broker (acl config)", func(c *cobra.Command) func(context.Context, *adm) error {
		var broker, cluster string
		brokerSel(c, &broker, &cluster)
		return func(ctx context.Context, a *adm) error { return a.aclConfig(ctx, broker, cluster) }
	}, run)
	getACL.Aliases = []string{"getAccessConfigSubCommand"} // 4.9's name of the command
	add(getACL)
	add(printMsgCmd(run), printMsgByQueueCmd(run), sendMsgStatusCmd(run))
	for _, c := range out {
		javaLongNames(c)
	}
	return out
}

// wrapOffline reruns clone's RunE after boolArg parsing: cloneOffsetCmd
// binds its own offline variable, which the alias replaced.
func wrapOffline(c *cobra.Command, offline *bool, run runner) func(*cobra.Command, []string) error {
	get := func(name string) string { return c.Flags().Lookup(name).Value.String() }
	return func(cmd *cobra.Command, args []string) error {
		return run(func(ctx context.Context, a *adm) error {
			return a.cloneOffsets(ctx, get("src"), get("dest"), get("topic"), *offline)
		})(cmd, args)
	}
}
