package main

// The console's object and action endpoints, on client/admin and the mq
// admin functions: topics (paged, with create/update/delete), test sends,
// producer and consumer connections with running info, broker config and
// ACL accounts. Every POST here is an action: refused unless the console
// has admin rights (and, with console.auth: acl, bounded by the account).

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"

	clientadmin "github.com/quivermq/quiver/client/admin"
	"github.com/quivermq/quiver/core/message"
	"github.com/quivermq/quiver/core/protocol"
	"github.com/quivermq/quiver/internal/netlimit"
)

// action is api for a POST that changes the cluster.
func (c *consoleServer) action(f func(ctx context.Context, a *adm, r *http.Request) (any, error)) http.HandlerFunc {
	return c.api(func(ctx context.Context, a *adm, r *http.Request) (any, error) {
		if !c.allow {
			return nil, errForbidden
		}
		if err := netlimit.ParseForm(r, consoleMaxBody); err != nil {
			return nil, formError(err)
		}
		c.log.Info("console: action", "path", r.URL.Path, "remote", r.RemoteAddr, "user", loginUser(r))
		return f(ctx, a, r)
	})
}

func loginUser(r *http.Request) string {
	if l := loginOf(r.Context()); l != nil {
		return l.user
	}
	return ""
}

// page is one page of a list.
type listPage[T any] struct {
	Items []T `json:"items"`
	Total int `json:"total"`
	Page  int `json:"page"`
	Size  int `json:"size"`
}

// paged cuts page ?page= (from 1) of ?size= (default 20, at most 500).
func paged[T any](r *http.Request, all []T) (listPage[T], error) {
	q := r.URL.Query()
	p, size := 1, 20
	if s := q.Get("page"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			return listPage[T]{}, badRequest("page %q: want a number from 1", s)
		}
		p = n
	}
	if s := q.Get("size"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > 500 {
			return listPage[T]{}, badRequest("size %q: want 1..500", s)
		}
		size = n
	}
	lo := min((p-1)*size, len(all))
	hi := min(lo+size, len(all))
	items := all[lo:hi]
	if items == nil {
		items = []T{}
	}
	return listPage[T]{Items: items, Total: len(all), Page: p, Size: size}, nil
}

func formInt(r *http.Request, key string, def, lo, hi int) (int, error) {
	s := strings.TrimSpace(r.FormValue(key))
	if s == "" {
		return def, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < lo || n > hi {
		return 0, badRequest("%s %q: want %d..%d", key, s, lo, hi)
	}
	return n, nil
}

// topicDetail is GET /api/topics/{topic}.
type topicDetail struct {
	topicSummary
	Configs map[string]*protocol.TopicConfig `json:"configs"` // by broker address
}

func (c *consoleServer) apiRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /api/topics", c.api(func(ctx context.Context, a *adm, r *http.Request) (any, error) {
		ts, err := c.topics(ctx, a)
		if err != nil {
			return nil, err
		}
		if q := strings.ToLower(strings.TrimSpace(r.URL.Query().Get("q"))); q != "" {
			var keep []topicSummary
			for _, t := range ts {
				if strings.Contains(strings.ToLower(t.Topic), q) {
					keep = append(keep, t)
				}
			}
			ts = keep
		}
		sort.Slice(ts, func(i, j int) bool { return ts[i].Topic < ts[j].Topic })
		return paged(r, ts)
	}))
	mux.HandleFunc("GET /api/topics/{topic}", c.api(func(ctx context.Context, a *adm, r *http.Request) (any, error) {
		topic := r.PathValue("topic")
		qs, err := a.topicStatus(ctx, topic)
		if err != nil {
			return nil, err
		}
		d := topicDetail{topicSummary: topicSummary{Topic: topic, Queues: qs}}
		for _, q := range qs {
			d.Messages += q.MaxOffset - q.MinOffset
		}
		ms, err := a.masters(ctx)
		if err != nil {
			return nil, err
		}
		if d.Configs, err = a.topicConfigs(ctx, ms, topic); err != nil {
			return nil, err
		}
		return d, nil
	}))
	mux.HandleFunc("POST /api/topics", c.action(func(ctx context.Context, a *adm, r *http.Request) (any, error) {
		topic := strings.TrimSpace(r.FormValue("topic"))
		if err := protocol.ValidateTopic(topic); err != nil {
			return nil, badRequest("%v", err)
		}
		if isInternalTopic(topic) {
			return nil, badRequest("topic %s is a system topic", topic)
		}
		rq, err := formInt(r, "readQueues", 8, 1, 1024)
		if err != nil {
			return nil, err
		}
		wq, err := formInt(r, "writeQueues", 8, 1, 1024)
		if err != nil {
			return nil, err
		}
		perm, err := formInt(r, "perm", protocol.PermRead|protocol.PermWrite, 1, 7)
		if err != nil {
			return nil, err
		}
		mode := r.FormValue("mode")
		if mode != "create" && mode != "update" {
			return nil, badRequest("mode %q: want create or update", mode)
		}
		ms, err := a.masters(ctx)
		if err != nil {
			return nil, err
		}
		have, err := a.topicConfigs(ctx, ms, topic)
		if err != nil {
			return nil, err
		}
		switch {
		case mode == "create" && len(have) > 0:
			return nil, badRequest("topic %s exists (update it instead)", topic)
		case mode == "update" && len(have) == 0:
			return nil, badRequest("topic %s does not exist", topic)
		}
		lib, err := a.library()
		if err != nil {
			return nil, err
		}
		tc := clientadmin.TopicConfig{Topic: topic, ReadQueueNums: rq, WriteQueueNums: wq, Perm: perm, Order: r.FormValue("order") == "true"}
		if err := lib.CreateTopic(ctx, tc); err != nil {
			return nil, err
		}
		return map[string]any{"topic": topic, "readQueues": rq, "writeQueues": wq, "perm": perm, "mode": mode}, nil
	}))
	mux.HandleFunc("POST /api/topics/{topic}/delete", c.action(func(ctx context.Context, a *adm, r *http.Request) (any, error) {
		topic := r.PathValue("topic")
		if isInternalTopic(topic) {
			return nil, badRequest("topic %s is a system topic", topic)
		}
		if r.FormValue("confirm") != topic {
			return nil, badRequest("confirm the deletion by giving the topic's name in confirm")
		}
		lib, err := a.library()
		if err != nil {
			return nil, err
		}
		if err := lib.DeleteTopic(ctx, topic); err != nil {
			return nil, err
		}
		return map[string]string{"deleted": topic}, nil
	}))
	mux.HandleFunc("POST "+consoleSendPath, c.action(func(ctx context.Context, a *adm, r *http.Request) (any, error) {
		topic := strings.TrimSpace(r.FormValue("topic"))
		if topic == "" {
			return nil, badRequest("give a topic")
		}
		props := message.Properties{}
		for _, line := range strings.Split(r.FormValue("properties"), "\n") {
			line = strings.TrimSpace(line)
			if line == "" {
				continue
			}
			k, v, ok := strings.Cut(line, "=")
			if !ok || strings.TrimSpace(k) == "" {
				return nil, badRequest("property %q: want key=value", line)
			}
			props[strings.TrimSpace(k)] = strings.TrimSpace(v)
		}
		return a.sendOne(ctx, sendSpec{topic: topic, body: r.FormValue("body"), tags: strings.TrimSpace(r.FormValue("tags")),
			keys: strings.TrimSpace(r.FormValue("keys")), group: orDefault(r.FormValue("group"), "QUIVER_CONSOLE_PRODUCER"), queue: -1, props: props})
	}))
	mux.HandleFunc("GET /api/producers", c.api(func(ctx context.Context, a *adm, r *http.Request) (any, error) {
		group := strings.TrimSpace(r.URL.Query().Get("group"))
		if group == "" {
			return nil, badRequest("give a producer group")
		}
		ms, err := a.masters(ctx)
		if err != nil {
			return nil, err
		}
		lib, err := a.library()
		if err != nil {
			return nil, err
		}
		out := []groupClient{}
		for _, m := range ms {
			conns, _, err := lib.ProducerConnections(ctx, m.Addr, group)
			if err != nil {
				return nil, err
			}
			for _, cn := range conns {
				out = append(out, groupClient{ClientID: cn.ClientID, ClientAddr: cn.ClientAddr, Language: cn.Language, Version: cn.Version, Broker: m.Name})
			}
		}
		return out, nil
	}))
	mux.HandleFunc("GET /api/consumers/running", c.api(func(ctx context.Context, a *adm, r *http.Request) (any, error) {
		q := r.URL.Query()
		group, client := q.Get("group"), q.Get("clientId")
		if group == "" || client == "" {
			return nil, badRequest("give group and clientId")
		}
		ms, err := a.masters(ctx)
		if err != nil {
			return nil, err
		}
		lib, err := a.library()
		if err != nil {
			return nil, err
		}
		var last error
		for _, m := range ms {
			body, err := lib.ConsumerRunningInfo(ctx, m.Addr, group, client, false)
			if err == nil {
				// fastjson with objects as map keys: shown as text.
				return map[string]string{"broker": m.Name, "runningInfo": string(body)}, nil
			}
			last = err
		}
		return nil, last
	}))
	mux.HandleFunc("GET /api/broker/config", c.api(func(ctx context.Context, a *adm, r *http.Request) (any, error) {
		addr, err := c.brokerAddr(ctx, a, r.URL.Query().Get("broker"))
		if err != nil {
			return nil, err
		}
		lib, err := a.library()
		if err != nil {
			return nil, err
		}
		cfg, err := lib.BrokerConfig(ctx, addr)
		if err != nil {
			return nil, err
		}
		return map[string]any{"broker": addr, "config": cfg}, nil
	}))
	mux.HandleFunc("POST /api/broker/config", c.action(func(ctx context.Context, a *adm, r *http.Request) (any, error) {
		addr, err := c.brokerAddr(ctx, a, r.FormValue("broker"))
		if err != nil {
			return nil, err
		}
		key, value := strings.TrimSpace(r.FormValue("key")), strings.TrimSpace(r.FormValue("value"))
		if key == "" {
			return nil, badRequest("give a key")
		}
		lib, err := a.library()
		if err != nil {
			return nil, err
		}
		if err := lib.UpdateBrokerConfig(ctx, addr, map[string]string{key: value}); err != nil {
			return nil, err
		}
		return map[string]string{"broker": addr, "key": key, "value": value}, nil
	}))
	mux.HandleFunc("GET /api/acl", c.api(func(ctx context.Context, a *adm, r *http.Request) (any, error) {
		addr, err := c.brokerAddr(ctx, a, r.URL.Query().Get("broker"))
		if err != nil {
			return nil, err
		}
		lib, err := a.library()
		if err != nil {
			return nil, err
		}
		cfg, err := lib.ACLConfig(ctx, addr)
		if err != nil {
			return nil, err
		}
		for i := range cfg.PlainAccessConfigs {
			cfg.PlainAccessConfigs[i].SecretKey = "" // never shown
		}
		return map[string]any{"broker": addr, "acl": cfg}, nil
	}))
	mux.HandleFunc("POST /api/acl", c.action(func(ctx context.Context, a *adm, r *http.Request) (any, error) {
		ac := clientadmin.AccessConfig{AccessKey: strings.TrimSpace(r.FormValue("accessKey")), SecretKey: r.FormValue("secretKey"),
			WhiteRemoteAddress: strings.TrimSpace(r.FormValue("whiteRemoteAddress")), Admin: r.FormValue("admin") == "true",
			DefaultTopicPerm: strings.TrimSpace(r.FormValue("defaultTopicPerm")), DefaultGroupPerm: strings.TrimSpace(r.FormValue("defaultGroupPerm")),
			TopicPerms: splitList(r.FormValue("topicPerms")), GroupPerms: splitList(r.FormValue("groupPerms"))}
		if ac.AccessKey == "" {
			return nil, badRequest("give an accessKey")
		}
		return c.eachMaster(ctx, a, func(lib *clientadmin.Admin, addr string) error { return lib.UpdateAccessConfig(ctx, addr, ac) })
	}))
	mux.HandleFunc("POST /api/acl/delete", c.action(func(ctx context.Context, a *adm, r *http.Request) (any, error) {
		ak := strings.TrimSpace(r.FormValue("accessKey"))
		if ak == "" {
			return nil, badRequest("give an accessKey")
		}
		return c.eachMaster(ctx, a, func(lib *clientadmin.Admin, addr string) error { return lib.DeleteAccessConfig(ctx, addr, ak) })
	}))
}

// brokerAddr is the master named by broker (a name or an address), or the
// first master when empty.
func (c *consoleServer) brokerAddr(ctx context.Context, a *adm, broker string) (string, error) {
	ms, err := a.masters(ctx)
	if err != nil {
		return "", err
	}
	for _, m := range ms {
		if broker == "" || m.Addr == broker || m.Name == broker {
			return m.Addr, nil
		}
	}
	return "", badRequest("no master broker %s", broker)
}

// eachMaster runs f on every master and returns the addresses done.
func (c *consoleServer) eachMaster(ctx context.Context, a *adm, f func(lib *clientadmin.Admin, addr string) error) (any, error) {
	ms, err := a.masters(ctx)
	if err != nil {
		return nil, err
	}
	lib, err := a.library()
	if err != nil {
		return nil, err
	}
	done := []string{}
	for _, m := range ms {
		if err := f(lib, m.Addr); err != nil {
			return nil, fmt.Errorf("%s (done on %v): %w", m.Name, done, err)
		}
		done = append(done, m.Addr)
	}
	return map[string]any{"brokers": done}, nil
}
