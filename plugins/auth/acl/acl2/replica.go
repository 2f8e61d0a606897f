package acl2

import (
	"encoding/json"
	"fmt"

	"github.com/quivermq/quiver/core/auth"
	"github.com/quivermq/quiver/core/remoting"
)

var _ auth.Replicated = (*Plugin)(nil)

// ReplicaDocs implements auth.Replicated: a slave copies its master's
// users (AUTH_LIST_USER) and policies (AUTH_LIST_ACL) as soon as the
// store's version changes (the master reports it in its HA_PULL answers
// and wakes held ones on a change) and every ha.meta_interval, as it
// copies topics and offsets, once its log has caught up with the
// master's at the time of the copy. It signs as
// auth.acl2.access_key (a user with Get on the cluster), or with the
// process's credential.
func (p *Plugin) ReplicaDocs() []auth.ReplicaDoc {
	return []auth.ReplicaDoc{
		{Name: "acl2 users", Code: remoting.AuthListUser, Version: p.store.Version, Watch: p.store.Watch, Apply: func(body []byte) error {
			var us []User
			if len(body) > 0 {
				if err := json.Unmarshal(body, &us); err != nil {
					return fmt.Errorf("acl2: the master's users: %w", err)
				}
			}
			if sameUsers(p.store.ListUsers(""), us) {
				return nil
			}
			p.log.Info("acl2: users copied from the master", "users", len(us))
			return p.store.ReplaceUsers(us)
		}},
		{Name: "acl2 policies", Code: remoting.AuthListACL, Version: p.store.Version, Apply: func(body []byte) error {
			var as []ACL
			if len(body) > 0 {
				if err := json.Unmarshal(body, &as); err != nil {
					return fmt.Errorf("acl2: the master's policies: %w", err)
				}
			}
			old, _ := json.Marshal(p.store.ListACLs("", ""))
			if len(as) == 0 && string(old) == "null" {
				return nil
			}
			if now, _ := json.Marshal(as); string(now) == string(old) {
				return nil
			}
			p.log.Info("acl2: policies copied from the master", "subjects", len(as))
			return p.store.ReplaceACLs(as)
		}},
	}
}

func sameUsers(a, b []User) bool {
	if len(a) != len(b) {
		return false
	}
	m := make(map[string]User, len(a))
	for _, u := range a {
		m[u.Username] = u
	}
	for _, u := range b {
		if x, ok := m[u.Username]; !ok || x != u {
			return false
		}
	}
	return true
}
