package acl2

import (
	"fmt"
	"net/netip"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var allActions = []Action{Pub, Sub, Create, Update, Delete, Get, List}

func testStore(t *testing.T) *Store {
	t.Helper()
	s, err := OpenStore(filepath.Join(t.TempDir(), "acl2.json"))
	require.NoError(t, err)
	return s
}

func entry(res string, dec Decision, acts ...Action) Entry {
	e := Entry{Resource: res, Decision: string(dec)}
	for _, a := range acts {
		e.Actions = append(e.Actions, string(a))
	}
	return e
}

func grant(t *testing.T, s *Store, user string, typ PolicyType, es ...Entry) {
	t.Helper()
	if _, ok := s.GetUser(user); !ok {
		require.NoError(t, s.CreateUser(User{Username: user, Password: "pw-" + user}))
	}
	require.NoError(t, s.PutACL(ACL{Subject: UserSubject(user), Policies: []Policy{{PolicyType: string(typ), Entries: es}}}))
}

func decideOn(s *Store, user string, typ ResourceType, name string, src string, acts ...Action) Result {
	var ip netip.Addr
	if src != "" {
		ip = netip.MustParseAddr(src)
	}
	return s.load().decide(Request{User: user, Resource: Resource{Type: typ, Name: name, Pattern: Literal}, Actions: acts, Source: ip}, Deny)
}

// TestEveryActionResourceMatch: for each resource kind, match kind and
// action, an entry allowing (then denying) that action decides exactly
// the requests it covers: the action on a name it matches; not another
// action, not a name it does not match, not another kind.
func TestEveryActionResourceMatch(t *testing.T) {
	kinds := []ResourceType{Cluster, Namespace, Topic, Group}
	type match struct {
		name    string
		key     func(ResourceType) string
		other   bool // covers another name of the kind
		anyKind bool // covers other kinds
	}
	matches := []match{
		{"exact", func(k ResourceType) string { return string(k) + ":orders" }, false, false},
		{"prefix", func(k ResourceType) string { return string(k) + ":ord*" }, false, false},
		{"wildcard", func(k ResourceType) string { return string(k) + ":*" }, true, false},
		{"any", func(ResourceType) string { return "*" }, true, true},
	}
	n := 0
	for _, k := range kinds {
		otherKind := Topic
		if k == Topic {
			otherKind = Group
		}
		for _, m := range matches {
			for _, a := range allActions {
				for _, dec := range []Decision{Allow, Deny} {
					name := fmt.Sprintf("%s/%s/%s/%s", k, m.name, a, dec)
					t.Run(name, func(t *testing.T) {
						s := testStore(t)
						entries := []Entry{entry(m.key(k), dec, a)}
						if dec == Deny {
							// Something to deny: Allow everything less specifically.
							entries = append(entries, entry("*", Allow, All))
							if m.name == "any" {
								entries = entries[:1]
							}
						}
						grant(t, s, "u", Custom, entries...)
						covered := func(r Result) bool {
							if dec == Allow {
								return r.Allowed
							}
							return !r.Allowed
						}
						assert.True(t, covered(decideOn(s, "u", k, "orders", "", a)), "the action on a matching name")
						assert.True(t, covered(decideOn(s, "u", k, "orders-eu", "", a)) == (m.name != "exact"), "a longer name")
						other := decideOn(s, "u", k, "payments", "", a)
						assert.Equal(t, m.other, covered(other), "another name: %+v", other)
						kind := decideOn(s, "u", otherKind, "orders", "", a)
						assert.Equal(t, m.anyKind, covered(kind), "another kind: %+v", kind)
						for _, b := range allActions {
							if b != a {
								r := decideOn(s, "u", k, "orders", "", b)
								if dec == Allow {
									assert.False(t, r.Allowed, "action %s not granted", b)
								} else if m.name != "any" {
									assert.True(t, r.Allowed, "action %s not denied", b)
								}
							}
						}
					})
					n++
				}
			}
		}
	}
	assert.Equal(t, 4*4*7*2, n)
}

func TestAllCoversEveryAction(t *testing.T) {
	s := testStore(t)
	grant(t, s, "u", Custom, entry("Topic:orders", Allow, All))
	for _, a := range allActions {
		assert.True(t, decideOn(s, "u", Topic, "orders", "", a).Allowed, a)
	}
	assert.True(t, decideOn(s, "u", Topic, "orders", "", Any).Allowed, "a request any action will do")
}

func TestDenyOverAllow(t *testing.T) {
	s := testStore(t)
	// Equally specific: Deny wins, whatever the order.
	grant(t, s, "a", Custom, entry("Topic:orders", Allow, Pub, Sub))
	grant(t, s, "a", Default, entry("Topic:orders", Deny, Pub))
	assert.True(t, decideOn(s, "a", Topic, "orders", "", Sub).Allowed, "Custom allows Sub")
	assert.True(t, decideOn(s, "a", Topic, "orders", "", Pub).Allowed, "a Custom match hides the Default policy")
	s2 := testStore(t)
	grant(t, s2, "c", Custom, entry("Topic:orders", Deny, Pub), entry("Group:g", Allow, Sub))
	grant(t, s2, "c", Custom, entry("Topic:orders", Allow, Pub)) // replaces the entry of its resource
	assert.True(t, decideOn(s2, "c", Topic, "orders", "", Pub).Allowed)

	// Two entries of one specificity cannot share a resource in one
	// policy, so equal specificity means two prefixes of one length.
	s3 := testStore(t)
	grant(t, s3, "d", Custom, entry("Topic:ab*", Allow, Pub), entry("Topic:ac*", Deny, Pub), entry("*", Deny, All))
	assert.True(t, decideOn(s3, "d", Topic, "ab1", "", Pub).Allowed)
	assert.False(t, decideOn(s3, "d", Topic, "ac1", "", Pub).Allowed)
	s4 := testStore(t)
	grant(t, s4, "e", Custom, entry("Topic:*", Allow, Pub), entry("*", Deny, Pub))
	assert.True(t, decideOn(s4, "e", Topic, "x", "", Pub).Allowed, "Topic:* is more specific than *")
	s5 := testStore(t)
	grant(t, s5, "f", Custom, entry("Topic:x*", Allow, Pub), entry("Topic:x", Deny, Pub), entry("Group:x", Allow, Sub))
	assert.False(t, decideOn(s5, "f", Topic, "x", "", Pub).Allowed, "a literal Deny over a prefix Allow")
	assert.True(t, decideOn(s5, "f", Topic, "xy", "", Pub).Allowed)
	// One request naming a resource twice, Allow and Deny: both are kept
	// (as Java's createAcl does) and Deny wins at one specificity.
	s6 := testStore(t)
	grant(t, s6, "g", Custom, entry("Topic:ab*", Allow, Pub), entry("Topic:ab*", Deny, Pub))
	assert.False(t, decideOn(s6, "g", Topic, "ab", "", Pub).Allowed, "Deny over Allow")
	assert.Contains(t, decideOn(s6, "g", Topic, "ab", "", Pub).Reason, "the decision is deny")

	// compareEntries directly: equal specificity, Deny first.
	x, y := entry("Topic:ab*", Allow, Pub), entry("Topic:cd*", Deny, Pub)
	require.NoError(t, x.compile())
	require.NoError(t, y.compile())
	assert.Positive(t, compareEntries(&x, &y))
	assert.Negative(t, compareEntries(&y, &x))
}

func TestCustomBeforeDefault(t *testing.T) {
	s := testStore(t)
	grant(t, s, "u", Custom, entry("Topic:a", Allow, Pub))
	grant(t, s, "u", Default, entry("Topic:*", Deny, Pub, Sub), entry("Topic:a", Deny, Pub))
	assert.True(t, decideOn(s, "u", Topic, "a", "", Pub).Allowed, "a Custom match hides the Default policy")
	assert.False(t, decideOn(s, "u", Topic, "a", "", Sub).Allowed)
	assert.False(t, decideOn(s, "u", Topic, "b", "", Pub).Allowed)
}

func TestSourceIPs(t *testing.T) {
	s := testStore(t)
	e := entry("Topic:t", Allow, Pub)
	e.SourceIPs = []string{"10.1.2.3", "192.168.0.0/16", "2001:db8::/32"}
	grant(t, s, "u", Custom, e)
	for src, want := range map[string]bool{
		"10.1.2.3": true, "10.1.2.4": false, "192.168.77.1": true, "192.169.0.1": false,
		"2001:db8::1": true, "2001:db9::1": false, "::ffff:192.168.1.1": true, "": false,
	} {
		assert.Equal(t, want, decideOn(s, "u", Topic, "t", src, Pub).Allowed, "from %q", src)
	}
	bad := entry("Topic:t", Allow, Pub)
	bad.SourceIPs = []string{"10.0.0.0/33"}
	assert.Error(t, s.PutACL(ACL{Subject: "User:u", Policies: []Policy{{PolicyType: "Custom", Entries: []Entry{bad}}}}))
	// A Deny from one network over an Allow for all.
	s2 := testStore(t)
	d := entry("Topic:t", Deny, Pub)
	d.SourceIPs = []string{"172.16.0.0/12"}
	grant(t, s2, "u", Custom, d, entry("Topic:t*", Allow, Pub))
	assert.False(t, decideOn(s2, "u", Topic, "t", "172.16.5.5", Pub).Allowed)
	assert.True(t, decideOn(s2, "u", Topic, "t", "10.0.0.1", Pub).Allowed)
}

func TestUsersDecide(t *testing.T) {
	s := testStore(t)
	require.NoError(t, s.CreateUser(User{Username: "root", Password: "pw", UserType: Super}))
	grant(t, s, "u", Custom, entry("*", Allow, All))
	assert.True(t, decideOn(s, "root", Cluster, "c", "", Update).Allowed, "a super user needs no policy")
	assert.True(t, decideOn(s, "u", Cluster, "c", "", Update).Allowed)
	require.NoError(t, s.UpdateUser(User{Username: "u", UserStatus: Disable}))
	r := decideOn(s, "u", Cluster, "c", "", Update)
	assert.False(t, r.Allowed)
	assert.Equal(t, "User:u is disabled.", r.Reason)
	assert.Equal(t, "User:nobody not found.", decideOn(s, "nobody", Topic, "t", "", Pub).Reason)
	require.NoError(t, s.CreateUser(User{Username: "bare", Password: "pw"}))
	r = decideOn(s, "bare", Topic, "t", "10.0.0.1", Pub)
	assert.Equal(t, "User:bare has no permission to access Topic:t from 10.0.0.1, no matched policies.", r.Reason)
	assert.True(t, s.load().decide(Request{User: "bare", Resource: MustResource("Topic:t"), Actions: []Action{Pub}}, Allow).Allowed,
		"default_decision Allow")
}

func TestParseResource(t *testing.T) {
	for in, want := range map[string]Resource{
		"*":           {Type: AnyType, Pattern: AnyName},
		"Topic:*":     {Type: Topic, Pattern: AnyName},
		"topic:ab*":   {Type: Topic, Name: "ab", Pattern: Prefixed},
		"Group:g1":    {Type: Group, Name: "g1", Pattern: Literal},
		"CLUSTER:c":   {Type: Cluster, Name: "c", Pattern: Literal},
		"Namespace:n": {Type: Namespace, Name: "n", Pattern: Literal},
	} {
		got, err := ParseResource(in)
		require.NoError(t, err, in)
		assert.Equal(t, want, got, in)
	}
	for _, bad := range []string{"", "Topic", "Queue:x", "Topic:", "Topic:a*b", "Topic:**"} {
		_, err := ParseResource(bad)
		assert.Error(t, err, bad)
	}
}
