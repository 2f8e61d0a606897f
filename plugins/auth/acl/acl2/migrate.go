package acl2

import (
	"fmt"
	"slices"

	"github.com/quivermq/quiver/plugins/auth/acl"
)

// MigrateReport says what MigrateV1 did.
type MigrateReport struct {
	Created []string // users created, with their policies
	Skipped []string // accounts whose user existed: left alone
	// Notes are what ACL 2.0 cannot carry over (white lists).
	Notes []string
}

const traceTopic = "RMQ_SYS_TRACE_TOPIC"

// MigrateV1 copies a plain_acl.yml's accounts into users and policies
// (RocketMQ 5.3's AuthMigrator, migrateAuthFromV1Enabled), so that the
// result decides as ACL 1.0 did:
//
//   - an account becomes a user of the same AccessKey and SecretKey; an
//     admin that lists no permissions (it had every resource) and a
//     cluster member (role: broker) become Super users, other accounts
//     Normal users;
//   - each listed topic or group becomes a Custom entry allowing its Pub
//     and Sub (DENY: denying both); the permission it lacks is denied by a
//     Default entry of the same resource, because ACL 1.0 does not fall
//     back to the defaults for a listed resource (Java's migrator lets a
//     listed SUB-only topic be published to under a PUB default);
//   - defaultTopicPerm and defaultGroupPerm become Default entries on
//     Topic:* and Group:* (absent: DENY, as ACL 1.0);
//   - Pub on RMQ_SYS_TRACE_TOPIC is allowed (ACL 1.0 always allows it);
//   - an admin that lists permissions keeps them and is allowed Create,
//     Update, Delete, Get and List on everything ("*");
//   - white lists are not migrated: ACL 2.0 authenticates every request.
//
// A user that exists is left alone, so migrating twice changes nothing.
func MigrateV1(st *Store, data []byte) (MigrateReport, error) {
	plan, err := PlanV1(data)
	if err != nil {
		return MigrateReport{}, err
	}
	rep := MigrateReport{Notes: plan.Notes}
	for i, u := range plan.Users {
		if _, ok := st.GetUser(u.Username); ok {
			rep.Skipped = append(rep.Skipped, u.Username)
			continue
		}
		if err := st.CreateUser(u); err != nil {
			return rep, fmt.Errorf("user %s: %w", u.Username, err)
		}
		if a := plan.ACLs[i]; len(a.Policies) > 0 {
			if err := st.PutACL(a); err != nil {
				return rep, fmt.Errorf("acl of %s: %w", u.Username, err)
			}
		}
		rep.Created = append(rep.Created, u.Username)
	}
	return rep, nil
}

// MigratePlan is what a plain_acl.yml becomes: Users[i]'s policies are
// ACLs[i] (no policies for a Super user).
type MigratePlan struct {
	Users []User
	ACLs  []ACL
	Notes []string
}

// PlanV1 turns a plain_acl.yml into users and policies (see MigrateV1)
// without storing them: `mq admin migrateAuthFromV1` sends them to
// brokers.
func PlanV1(data []byte) (MigratePlan, error) {
	f, err := acl.ParseV1(data)
	if err != nil {
		return MigratePlan{}, err
	}
	var plan MigratePlan
	if len(f.GlobalWhiteRemoteAddresses) > 0 {
		plan.Notes = append(plan.Notes, fmt.Sprintf("globalWhiteRemoteAddresses %v not migrated: ACL 2.0 has no white list", f.GlobalWhiteRemoteAddresses))
	}
	for _, a := range f.Accounts {
		if a.WhiteRemoteAddress != "" {
			plan.Notes = append(plan.Notes, fmt.Sprintf("whiteRemoteAddress %s of %s not migrated: ACL 2.0 has no white list", a.WhiteRemoteAddress, a.AccessKey))
		}
		u, policies := migrateAccount(a)
		plan.Users = append(plan.Users, u)
		plan.ACLs = append(plan.ACLs, ACL{Subject: UserSubject(a.AccessKey), Policies: policies})
	}
	return plan, nil
}

func migrateAccount(a acl.V1Account) (User, []Policy) {
	u := User{Username: a.AccessKey, Password: a.SecretKey, UserType: Normal, UserStatus: Enable}
	if a.Broker || (a.Admin && a.Topics == nil && a.Groups == nil) {
		u.UserType = Super
		return u, nil
	}
	var custom, def []Entry
	add := func(res string, perm byte) {
		acts := permActions(perm)
		if len(acts) == 0 {
			custom = append(custom, Entry{Resource: res, Actions: []string{string(Pub), string(Sub)}, Decision: string(Deny)})
			return
		}
		custom = append(custom, Entry{Resource: res, Actions: acts, Decision: string(Allow)})
		if missing := missingActions(acts); len(missing) > 0 {
			def = append(def, Entry{Resource: res, Actions: missing, Decision: string(Deny)})
		}
	}
	topics := a.Topics
	if topics == nil {
		topics = map[string]byte{}
	}
	if _, listed := topics[traceTopic]; !listed {
		custom = append(custom, Entry{Resource: "Topic:" + traceTopic, Actions: []string{string(Pub)}, Decision: string(Allow)})
	}
	for _, t := range sortedKeys(topics) {
		p := topics[t]
		if t == traceTopic {
			p = (p &^ acl.PermDeny) | acl.PermPub
		}
		add("Topic:"+t, p)
	}
	for _, g := range sortedKeys(a.Groups) {
		add("Group:"+g, a.Groups[g])
	}
	if a.Admin {
		custom = append(custom, Entry{Resource: "*", Actions: []string{string(Create), string(Update), string(Delete), string(Get), string(List)}, Decision: string(Allow)})
	}
	def = append(def, defaultEntry("Topic:*", a.DefaultTopic), defaultEntry("Group:*", a.DefaultGroup))
	var out []Policy
	if len(custom) > 0 {
		out = append(out, Policy{PolicyType: string(Custom), Entries: custom})
	}
	return u, append(out, Policy{PolicyType: string(Default), Entries: def})
}

func defaultEntry(res string, perm byte) Entry {
	acts := permActions(perm)
	if len(acts) == 0 {
		return Entry{Resource: res, Actions: []string{string(Pub), string(Sub)}, Decision: string(Deny)}
	}
	return Entry{Resource: res, Actions: acts, Decision: string(Allow)}
}

// permActions are the actions an ACL 1.0 permission allows (none for
// DENY).
func permActions(p byte) []string {
	if p&acl.PermDeny != 0 {
		return nil
	}
	var out []string
	if p&acl.PermPub != 0 {
		out = append(out, string(Pub))
	}
	if p&acl.PermSub != 0 {
		out = append(out, string(Sub))
	}
	return out
}

func missingActions(acts []string) []string {
	var out []string
	for _, a := range []string{string(Pub), string(Sub)} {
		if !slices.Contains(acts, a) {
			out = append(out, a)
		}
	}
	return out
}

func sortedKeys(m map[string]byte) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
