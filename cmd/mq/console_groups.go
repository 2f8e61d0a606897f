package main

// The console's subscription group management: read a group's config on
// each master, create or update it (retry queues and attempts, RocketMQ
// 5's retry policy, consume enable, broadcast, orderly, the brokers to
// read from) and delete it. The writes are actions (admin rights, the
// same-origin and CSRF checks of console_security.go, and with
// console.auth: acl the account's own permissions at the broker); a
// delete needs the group's name in confirm, which the page asks the user
// to type.

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"

	"github.com/quivermq/quiver/core/protocol"
)

// groupFormFields maps the form's fields to SubscriptionGroupConfig's
// keys, with each field's kind and bounds.
var groupFormFields = []struct {
	form, key string
	isBool    bool
	lo, hi    int64
}{
	{"retryQueueNums", "retryQueueNums", false, 0, 64},
	{"retryMaxTimes", "retryMaxTimes", false, -1, 10000},
	{"brokerId", "brokerId", false, 0, 1 << 20},
	{"whichBrokerWhenConsumeSlowly", "whichBrokerWhenConsumeSlowly", false, 0, 1 << 20},
	{"consumeEnable", "consumeEnable", true, 0, 0},
	{"consumeFromMinEnable", "consumeFromMinEnable", true, 0, 0},
	{"consumeBroadcastEnable", "consumeBroadcastEnable", true, 0, 0},
	{"consumeMessageOrderly", "consumeMessageOrderly", true, 0, 0},
}

// groupForm reads the settings a request gives (only the fields present).
func groupForm(r *http.Request) (map[string]any, error) {
	if err := r.ParseForm(); err != nil {
		return nil, badRequest("%v", err)
	}
	given := map[string]any{}
	for _, f := range groupFormFields {
		if _, ok := r.PostForm[f.form]; !ok {
			continue
		}
		s := strings.TrimSpace(r.PostForm.Get(f.form))
		if f.isBool {
			b, err := strconv.ParseBool(s)
			if err != nil {
				return nil, badRequest("%s %q: want true or false", f.form, s)
			}
			given[f.key] = b
			continue
		}
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < f.lo || n > f.hi {
			return nil, badRequest("%s %q: want %d..%d", f.form, s, f.lo, f.hi)
		}
		given[f.key] = n
	}
	if _, ok := r.PostForm["groupRetryPolicy"]; ok {
		s := strings.TrimSpace(r.PostForm.Get("groupRetryPolicy"))
		if s != "" {
			var p struct {
				Type string `json:"type"`
			}
			if err := json.Unmarshal([]byte(s), &p); err != nil {
				return nil, badRequest("groupRetryPolicy: not a JSON object: %v", err)
			}
			if p.Type != "EXPONENTIAL" && p.Type != "CUSTOMIZED" {
				return nil, badRequest("groupRetryPolicy: type %q: want EXPONENTIAL or CUSTOMIZED", p.Type)
			}
			given["groupRetryPolicy"] = json.RawMessage(s)
		}
	}
	return given, nil
}

// groupConfigs is each master's config of group, by broker name.
func (c *consoleServer) groupConfigs(ctx context.Context, a *adm, group string) (map[string]map[string]any, []brokerInfo, error) {
	ms, err := a.masters(ctx)
	if err != nil {
		return nil, nil, err
	}
	_, raws, err := a.groupBrokers(ctx, ms)
	if err != nil {
		return nil, nil, err
	}
	out := map[string]map[string]any{}
	for _, m := range ms {
		raw, ok := raws[group+"@"+m.Name]
		if !ok {
			continue
		}
		var cfg map[string]any
		if err := json.Unmarshal(raw, &cfg); err != nil {
			return nil, nil, badRequest("config of %s on %s: %v", group, m.Name, err)
		}
		out[m.Name] = cfg
	}
	return out, ms, nil
}

func (c *consoleServer) groupRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /api/groups/{group}/config", c.api(func(ctx context.Context, a *adm, r *http.Request) (any, error) {
		cfgs, _, err := c.groupConfigs(ctx, a, r.PathValue("group"))
		if err != nil {
			return nil, err
		}
		return map[string]any{"group": r.PathValue("group"), "configs": cfgs}, nil
	}))
	mux.HandleFunc("POST /api/groups", c.action(func(ctx context.Context, a *adm, r *http.Request) (any, error) {
		group := strings.TrimSpace(r.FormValue("group"))
		if err := protocol.ValidateGroup(group); err != nil {
			return nil, badRequest("%v", err)
		}
		if isSystemGroup(group) {
			return nil, badRequest("group %s is a system group", group)
		}
		mode := r.FormValue("mode")
		if mode != "create" && mode != "update" {
			return nil, badRequest("mode %q: want create or update", mode)
		}
		given, err := groupForm(r)
		if err != nil {
			return nil, err
		}
		cfgs, ms, err := c.groupConfigs(ctx, a, group)
		if err != nil {
			return nil, err
		}
		switch {
		case mode == "create" && len(cfgs) > 0:
			return nil, badRequest("consumer group %s exists (update it instead)", group)
		case mode == "update" && len(cfgs) == 0:
			return nil, badRequest("consumer group %s does not exist", group)
		}
		lib, err := a.library()
		if err != nil {
			return nil, err
		}
		done := map[string]map[string]any{}
		for _, m := range ms {
			cfg, ok := cfgs[m.Name]
			if !ok {
				if mode == "update" {
					continue // only where the group is
				}
				// mqadmin updateSubGroup's defaults.
				cfg = map[string]any{"groupName": group, "consumeEnable": true, "consumeFromMinEnable": true, "consumeBroadcastEnable": true,
					"consumeMessageOrderly": false, "retryQueueNums": 1, "retryMaxTimes": 16, "brokerId": 0, "whichBrokerWhenConsumeSlowly": 1,
					"notifyConsumerIdsChangedEnable": true}
			}
			for k, v := range given {
				cfg[k] = v // keys the console does not know stay as the broker has them
			}
			body, err := json.Marshal(cfg)
			if err != nil {
				return nil, err
			}
			if err := lib.PutSubscriptionGroup(ctx, m.Addr, body); err != nil {
				return nil, codeErr(err)
			}
			done[m.Name] = cfg
		}
		return map[string]any{"group": group, "mode": mode, "configs": done}, nil
	}))
	mux.HandleFunc("POST /api/groups/{group}/delete", c.action(func(ctx context.Context, a *adm, r *http.Request) (any, error) {
		group := r.PathValue("group")
		if isSystemGroup(group) {
			return nil, badRequest("group %s is a system group", group)
		}
		if r.FormValue("confirm") != group {
			return nil, badRequest("confirm the deletion by giving the group's name in confirm")
		}
		cfgs, ms, err := c.groupConfigs(ctx, a, group)
		if err != nil {
			return nil, err
		}
		if len(cfgs) == 0 {
			return nil, badRequest("consumer group %s does not exist", group)
		}
		lib, err := a.library()
		if err != nil {
			return nil, err
		}
		deleted := []string{}
		for _, m := range ms {
			if _, ok := cfgs[m.Name]; !ok {
				continue
			}
			if err := lib.DeleteSubscriptionGroup(ctx, m.Addr, group); err != nil {
				return nil, codeErr(err)
			}
			deleted = append(deleted, m.Name)
		}
		return map[string]any{"deleted": group, "brokers": deleted}, nil
	}))
}
