package acl2

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
)

// state is one immutable generation of users and ACLs; a change builds a
// new one (store.go), so checks never lock.
type state struct {
	version int64
	users   map[string]User
	acls    map[string]*ACL // by username
}

func newState() *state { return &state{users: map[string]User{}, acls: map[string]*ACL{}} }

func (s *state) clone() *state {
	out := &state{version: s.version, users: make(map[string]User, len(s.users)), acls: make(map[string]*ACL, len(s.acls))}
	for k, u := range s.users {
		out.users[k] = u
	}
	for k, a := range s.acls {
		c := cloneACL(*a)
		out.acls[k] = &c
	}
	return out
}

// Request is what an authorization decides: a user asking for actions on
// one resource from an address.
type Request struct {
	User     string
	Resource Resource // Literal; Name "" for a request that names none
	Actions  []Action // any of them will do
	Source   netip.Addr
}

// Result is a decision and why.
type Result struct {
	Allowed bool
	// Entry is the policy entry that decided, "" when none did.
	Entry string
	// Reason is Java's message for a refusal, or how it was allowed.
	Reason string
}

// decide is DefaultAuthorizationProvider's chain: the user must exist and
// be enabled; a super user passes; otherwise the subject's Custom policy
// entries that match the resource, an action and the source address are
// taken, or the Default policy's when none does; the most specific entry
// decides (a literal name before a prefix, a longer prefix before a
// shorter, a prefix before Type:*, Type:* before *), Deny before Allow
// among equally specific ones. No entry: def.
func (s *state) decide(req Request, def Decision) Result {
	u, ok := s.users[req.User]
	if !ok {
		return Result{Reason: fmt.Sprintf("User:%s not found.", req.User)}
	}
	if u.UserStatus == Disable {
		return Result{Reason: fmt.Sprintf("User:%s is disabled.", req.User)}
	}
	if u.UserType == Super {
		return Result{Allowed: true, Reason: "super user"}
	}
	deny := func(detail string) string {
		src := "unknown"
		if req.Source.IsValid() {
			src = req.Source.String()
		}
		return fmt.Sprintf("%s has no permission to access %s from %s, %s", UserSubject(req.User), req.Resource.Key(), src, detail)
	}
	acl := s.acls[req.User]
	var matched []*Entry
	if acl != nil {
		for _, t := range []PolicyType{Custom, Default} {
			if p := acl.policy(t); p != nil {
				for i := range p.Entries {
					e := &p.Entries[i]
					if e.res.Match(req.Resource) && e.matchAction(req.Actions) && e.matchSource(req.Source, req.Source.IsValid()) {
						matched = append(matched, e)
					}
				}
			}
			if len(matched) > 0 {
				break
			}
		}
	}
	if len(matched) == 0 {
		if def == Allow {
			return Result{Allowed: true, Reason: "no matched policies; default decision Allow"}
		}
		return Result{Reason: deny("no matched policies.")}
	}
	slices.SortStableFunc(matched, compareEntries)
	e := matched[0]
	if e.dec == Deny {
		return Result{Entry: e.Resource, Reason: deny("the decision is deny.")}
	}
	return Result{Allowed: true, Entry: e.Resource, Reason: "allowed by " + e.Resource}
}

// compareEntries orders entries from the most specific (Java
// AclAuthorizationHandler.comparePolicyEntries), Deny first at equal
// specificity. Java's comparator puts Deny last there, against its own
// comment ("the decision deny has higher priority"); Quiver does what
// the comment says.
func compareEntries(a, b *Entry) int {
	if c := rank(a.res) - rank(b.res); c != 0 {
		return c
	}
	if a.res.Pattern == Prefixed && b.res.Pattern == Prefixed {
		if c := len(b.res.Name) - len(a.res.Name); c != 0 {
			return c
		}
	}
	switch {
	case a.dec == b.dec:
		return 0
	case a.dec == Deny:
		return -1
	}
	return 1
}

func rank(r Resource) int {
	if r.Type == AnyType {
		return 3
	}
	return int(r.Pattern) - 1
}

// listUsers returns the users whose name contains filter, sorted.
func (s *state) listUsers(filter string) []User {
	var out []User
	for _, u := range s.users {
		if filter == "" || strings.Contains(u.Username, filter) {
			out = append(out, u)
		}
	}
	slices.SortFunc(out, func(a, b User) int { return strings.Compare(a.Username, b.Username) })
	return out
}

// listACLs returns the ACLs whose subject contains subjectFilter, with
// only the entries whose resource contains resourceFilter (an ACL left
// with none is left out), sorted by subject.
func (s *state) listACLs(subjectFilter, resourceFilter string) []ACL {
	var out []ACL
	for _, a := range s.acls {
		if subjectFilter != "" && !strings.Contains(a.Subject, subjectFilter) {
			continue
		}
		c := cloneACL(*a)
		if resourceFilter != "" {
			for i := range c.Policies {
				c.Policies[i].Entries = slices.DeleteFunc(c.Policies[i].Entries, func(e Entry) bool { return !strings.Contains(e.Resource, resourceFilter) })
			}
			c.Policies = slices.DeleteFunc(c.Policies, func(p Policy) bool { return len(p.Entries) == 0 })
			if len(c.Policies) == 0 {
				continue
			}
		}
		out = append(out, c)
	}
	slices.SortFunc(out, func(a, b ACL) int { return strings.Compare(a.Subject, b.Subject) })
	return out
}
