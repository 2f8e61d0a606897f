package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/quivermq/quiver/client"
	"github.com/quivermq/quiver/core/protocol"
	"github.com/quivermq/quiver/core/remoting"
)

// OrderTopicConfigNamespace is the name-server KV namespace whose entries
// (topic → "brokerName:queues;...") make topics globally ordered; name
// servers with orderMessageEnable put a topic's entry into its route.
const OrderTopicConfigNamespace = "ORDER_TOPIC_CONFIG"

// eachNameServer sends the request build makes to every name server, in
// order, and joins the errors of those that failed or refused; ok is
// called with each success.
func (a *Admin) eachNameServer(ctx context.Context, build func() *remoting.Command, ok func(addr string, resp *remoting.Command) error) error {
	var errs []error
	for _, ns := range a.c.NameServers() {
		resp, err := a.invokeOK(ctx, ns, build())
		if err == nil && ok != nil {
			err = ok(ns, resp)
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// nameServerOK asks one name server (round-robin over transport errors)
// and turns a refusal into a *client.BrokerError.
func (a *Admin) nameServerOK(ctx context.Context, build func() *remoting.Command) (*remoting.Command, error) {
	resp, addr, err := a.c.InvokeNameServer(ctx, build)
	if err != nil {
		return nil, err
	}
	if resp.Code != remoting.Success {
		return resp, client.NewBrokerError(addr, resp)
	}
	return resp, nil
}

// PutKVConfig sets namespace/key to value on every name server
// (PUT_KV_CONFIG), as mqadmin updateKvConfig does.
func (a *Admin) PutKVConfig(ctx context.Context, namespace, key, value string) error {
	err := a.eachNameServer(ctx, func() *remoting.Command {
		return client.NewRequest(remoting.PutKVConfig, map[string]string{"namespace": namespace, "key": key, "value": value}, nil)
	}, nil)
	if err != nil {
		return fmt.Errorf("admin: put kv config %s/%s: %w", namespace, key, err)
	}
	return nil
}

// DeleteKVConfig removes namespace/key on every name server
// (DELETE_KV_CONFIG); an absent key is no error.
func (a *Admin) DeleteKVConfig(ctx context.Context, namespace, key string) error {
	err := a.eachNameServer(ctx, func() *remoting.Command {
		return client.NewRequest(remoting.DeleteKVConfig, map[string]string{"namespace": namespace, "key": key}, nil)
	}, nil)
	if err != nil {
		return fmt.Errorf("admin: delete kv config %s/%s: %w", namespace, key, err)
	}
	return nil
}

// KVConfig reads namespace/key from a name server (GET_KV_CONFIG); found
// is false when it has none.
func (a *Admin) KVConfig(ctx context.Context, namespace, key string) (value string, found bool, err error) {
	resp, err := a.nameServerOK(ctx, func() *remoting.Command {
		return client.NewRequest(remoting.GetKVConfig, map[string]string{"namespace": namespace, "key": key}, nil)
	})
	if client.CodeOf(err) == remoting.QueryNotFound {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("admin: get kv config %s/%s: %w", namespace, key, err)
	}
	return resp.Ext("value"), true, nil
}

// KVList reads a namespace's table from a name server
// (GET_KVLIST_BY_NAMESPACE); found is false when the namespace was never
// written.
func (a *Admin) KVList(ctx context.Context, namespace string) (table map[string]string, found bool, err error) {
	resp, err := a.nameServerOK(ctx, func() *remoting.Command {
		return client.NewRequest(remoting.GetKVListByNamespace, map[string]string{"namespace": namespace}, nil)
	})
	if client.CodeOf(err) == remoting.QueryNotFound {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("admin: kv list %s: %w", namespace, err)
	}
	var t struct {
		Table map[string]string `json:"table"`
	}
	if err := json.Unmarshal(resp.Body, &t); err != nil {
		return nil, false, fmt.Errorf("admin: decode kv list %s: %w", namespace, err)
	}
	if t.Table == nil {
		t.Table = map[string]string{}
	}
	return t.Table, true, nil
}

// WipeWritePerm removes write permission from every queue of brokerName on
// every name server (WIPE_WRITE_PERM_OF_BROKER), so producers stop sending
// to it while consumers drain it: a graceful decommission. It returns, by
// name-server address, how many topics each changed. The wipe lasts until
// AddWritePerm, or until the broker registers a changed topic table or
// registers afresh (after its connection dropped).
func (a *Admin) WipeWritePerm(ctx context.Context, brokerName string) (map[string]int, error) {
	return a.writePerm(ctx, remoting.WipeWritePermOfBroker, "wipeTopicCount", brokerName)
}

// AddWritePerm makes every queue of brokerName readable and writable again
// on every name server (ADD_WRITE_PERM_OF_BROKER) and returns, by
// name-server address, how many topics each changed.
func (a *Admin) AddWritePerm(ctx context.Context, brokerName string) (map[string]int, error) {
	return a.writePerm(ctx, remoting.AddWritePermOfBroker, "addTopicCount", brokerName)
}

func (a *Admin) writePerm(ctx context.Context, code int32, field, brokerName string) (map[string]int, error) {
	out := map[string]int{}
	err := a.eachNameServer(ctx, func() *remoting.Command {
		return client.NewRequest(code, map[string]string{"brokerName": brokerName}, nil)
	}, func(ns string, resp *remoting.Command) error {
		n, err := strconv.Atoi(resp.Ext(field))
		if err != nil {
			return fmt.Errorf("%s: %s %q: %w", ns, field, resp.Ext(field), err)
		}
		out[ns] = n
		return nil
	})
	if err != nil {
		return out, fmt.Errorf("admin: %s of %s: %w", remoting.RequestCodeName(code), brokerName, err)
	}
	return out, nil
}

// NamesrvConfig returns, by name-server address, the settings each name
// server reports (GET_NAMESRV_CONFIG): a Quiver name server reports those
// it can change at run time, a Java one all of them.
func (a *Admin) NamesrvConfig(ctx context.Context) (map[string]map[string]string, error) {
	out := map[string]map[string]string{}
	err := a.eachNameServer(ctx, func() *remoting.Command {
		return client.NewRequest(remoting.GetNamesrvConfig, nil, nil)
	}, func(ns string, resp *remoting.Command) error {
		out[ns] = parseJavaProperties(string(resp.Body))
		return nil
	})
	if err != nil {
		return out, fmt.Errorf("admin: name server config: %w", err)
	}
	return out, nil
}

// UpdateNamesrvConfig changes settings on every name server
// (UPDATE_NAMESRV_CONFIG). A Quiver name server applies all of them or
// none, and says which keys it refused and why.
func (a *Admin) UpdateNamesrvConfig(ctx context.Context, settings map[string]string) error {
	keys := make([]string, 0, len(settings))
	for k, v := range settings {
		if k == "" || strings.ContainsAny(k, "=: \t\f\r\n#!\\") || strings.ContainsAny(v, "\r\n\\") {
			return fmt.Errorf("admin: update name server config: setting %q=%q cannot be written as a properties line", k, v)
		}
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		b.WriteString(k + "=" + settings[k] + "\n")
	}
	body := []byte(b.String())
	err := a.eachNameServer(ctx, func() *remoting.Command {
		return client.NewRequest(remoting.UpdateNamesrvConfig, nil, body)
	}, nil)
	if err != nil {
		return fmt.Errorf("admin: update name server config: %w", err)
	}
	return nil
}

// parseJavaProperties reads the "key=value\n" text Java's
// MixAll.properties2String writes (and Quiver's name server too).
func parseJavaProperties(text string) map[string]string {
	out := map[string]string{}
	for _, line := range strings.Split(strings.ReplaceAll(text, "\r\n", "\n"), "\n") {
		line = strings.TrimLeft(line, " \t\f")
		if line == "" || line[0] == '#' || line[0] == '!' {
			continue
		}
		k, v, _ := strings.Cut(line, "=")
		out[strings.TrimSpace(k)] = v
	}
	return out
}

// SystemTopics returns what a name server lists as system topics
// (GET_SYSTEM_TOPIC_LIST_FROM_NS): the cluster and broker names, sorted,
// and the address of one broker to ask for its own.
func (a *Admin) SystemTopics(ctx context.Context) (topics []string, brokerAddr string, err error) {
	tl, err := a.topicList(ctx, remoting.GetSystemTopicListFromNS, nil)
	if err != nil {
		return nil, "", err
	}
	return tl.TopicList, tl.BrokerAddr, nil
}

// TopicsByCluster lists the topics served by a cluster's brokers
// (GET_TOPICS_BY_CLUSTER), sorted; an unknown cluster has none.
func (a *Admin) TopicsByCluster(ctx context.Context, cluster string) ([]string, error) {
	tl, err := a.topicList(ctx, remoting.GetTopicsByCluster, map[string]string{"cluster": cluster})
	if err != nil {
		return nil, err
	}
	return tl.TopicList, nil
}

func (a *Admin) topicList(ctx context.Context, code int32, ext map[string]string) (*protocol.TopicList, error) {
	name := remoting.RequestCodeName(code)
	resp, err := a.nameServerOK(ctx, func() *remoting.Command {
		e := map[string]string{}
		for k, v := range ext {
			e[k] = v
		}
		return client.NewRequest(code, e, nil)
	})
	if err != nil {
		return nil, fmt.Errorf("admin: %s: %w", name, err)
	}
	var tl protocol.TopicList
	if err := json.Unmarshal(resp.Body, &tl); err != nil {
		return nil, fmt.Errorf("admin: decode %s: %w", name, err)
	}
	if tl.TopicList == nil {
		tl.TopicList = []string{}
	}
	sort.Strings(tl.TopicList)
	return &tl, nil
}
