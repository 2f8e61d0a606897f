package main

// mq admin createUser … listAcl, copyUser, copyAcl: RocketMQ 5.3's ACL
// 2.0 administration with mqadmin's names and flags (-b broker address or
// -c cluster; every master without either), and migrateAuthFromV1, which
// sends a plain_acl.yml's accounts to brokers as users and policies (the
// broker-side switch is auth.acl2.migrate_from_v1). The broker runs with
// auth.acl2.enabled; sign with --access-key/--secret-key as a Super user
// or one allowed Update (Get to read) on the cluster.

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	clientadmin "github.com/quivermq/quiver/client/admin"
	"github.com/quivermq/quiver/plugins/auth/acl/acl2"
)

// acl2Target is -b/-c of every ACL 2.0 command.
type acl2Target struct{ broker, cluster string }

func (t *acl2Target) flags(c *cobra.Command) {
	c.Flags().StringVarP(&t.broker, "brokerAddr", "b", "", "broker address (default: every master)")
	c.Flags().StringVarP(&t.cluster, "clusterName", "c", "", "every master of this cluster")
}

// each runs f on every target broker with the library.
func (t *acl2Target) each(ctx context.Context, a *adm, f func(lib *clientadmin.Admin, addr string) error) error {
	addrs, err := a.brokerAddrs(ctx, t.broker, t.cluster)
	if err != nil {
		return err
	}
	lib, err := a.library()
	if err != nil {
		return err
	}
	for _, addr := range addrs {
		if err := f(lib, addr); err != nil {
			return err
		}
	}
	return nil
}

func splitComma(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// acl2Done is the answer of a change: the brokers it was made on.
type acl2Done struct {
	Done    string   `json:"done"`
	Brokers []string `json:"brokers"`
}

func (a *adm) printDone(what string, brokers []string) error {
	rows := make([][]string, 0, len(brokers))
	for _, b := range brokers {
		rows = append(rows, []string{b, what})
	}
	return a.print(acl2Done{Done: what, Brokers: brokers}, "BROKER\tDONE", rows)
}

// userView is a user in listings: the password is not printed.
type userView struct {
	Broker     string `json:"broker"`
	Username   string `json:"username"`
	UserType   string `json:"userType"`
	UserStatus string `json:"userStatus"`
}

// aclEntryView is one policy entry in listings.
type aclEntryView struct {
	Broker     string   `json:"broker"`
	Subject    string   `json:"subject"`
	PolicyType string   `json:"policyType"`
	Resource   string   `json:"resource"`
	Actions    []string `json:"actions"`
	SourceIPs  []string `json:"sourceIps"`
	Decision   string   `json:"decision"`
}

func (a *adm) printUsers(us []userView) error {
	rows := make([][]string, 0, len(us))
	for _, u := range us {
		rows = append(rows, []string{u.Broker, u.Username, u.UserType, u.UserStatus})
	}
	if us == nil {
		us = []userView{}
	}
	return a.print(us, "BROKER\tUSERNAME\tUSER TYPE\tUSER STATUS", rows)
}

func (a *adm) printACLs(es []aclEntryView) error {
	rows := make([][]string, 0, len(es))
	for _, e := range es {
		rows = append(rows, []string{e.Broker, e.Subject, e.PolicyType, e.Resource, strings.Join(e.Actions, ","), strings.Join(e.SourceIPs, ","), e.Decision})
	}
	if es == nil {
		es = []aclEntryView{}
	}
	return a.print(es, "BROKER\tSUBJECT\tPOLICY TYPE\tRESOURCE\tACTIONS\tSOURCE IPS\tDECISION", rows)
}

func entryViews(broker string, acls []clientadmin.AclInfo) []aclEntryView {
	var out []aclEntryView
	for _, acl := range acls {
		for _, p := range acl.Policies {
			for _, e := range p.Entries {
				ips := e.SourceIPs
				if ips == nil {
					ips = []string{}
				}
				out = append(out, aclEntryView{Broker: broker, Subject: acl.Subject, PolicyType: p.PolicyType, Resource: e.Resource,
					Actions: e.Actions, SourceIPs: ips, Decision: e.Decision})
			}
		}
	}
	return out
}

// aclBody builds createAcl's body: one entry per resource with the
// actions, source addresses and decision (checked here as the broker
// will, so a typo is a usage error).
func aclBody(subject, resources, actions, sourceIPs, decision string) (clientadmin.AclInfo, error) {
	if _, err := acl2.ParseDecision(decision); err != nil {
		return clientadmin.AclInfo{}, usagef("-d: %v", err)
	}
	acts := splitComma(actions)
	if len(acts) == 0 {
		return clientadmin.AclInfo{}, usagef("-a: the actions are required (Pub, Sub, Create, Update, Delete, Get, List, All)")
	}
	for _, s := range acts {
		if _, err := acl2.ParseAction(s); err != nil {
			return clientadmin.AclInfo{}, usagef("-a: %v", err)
		}
	}
	res := splitComma(resources)
	if len(res) == 0 {
		return clientadmin.AclInfo{}, usagef("-r: the resources are required (Topic:t, Topic:prefix*, Group:g, Cluster:c, *)")
	}
	p := clientadmin.PolicyInfo{PolicyType: "Custom"}
	for _, r := range res {
		if _, err := acl2.ParseResource(r); err != nil {
			return clientadmin.AclInfo{}, usagef("-r: %v", err)
		}
		p.Entries = append(p.Entries, clientadmin.PolicyEntryInfo{Resource: r, Actions: acts, SourceIPs: splitComma(sourceIPs), Decision: decision})
	}
	return clientadmin.AclInfo{Subject: subject, Policies: []clientadmin.PolicyInfo{p}}, nil
}

func acl2Cmds(run runner) []*cobra.Command {
	var out []*cobra.Command
	add := func(c *cobra.Command, t *acl2Target, required ...string) {
		t.flags(c)
		for _, f := range required {
			_ = c.MarkFlagRequired(f)
		}
		out = append(out, c)
	}

	// Users.
	{
		var t acl2Target
		var u clientadmin.UserInfo
		c := &cobra.Command{Use: "createUser", Short: "Create an ACL 2.0 user (username = AccessKey, password = SecretKey)", Args: cobra.NoArgs,
			RunE: run(func(ctx context.Context, a *adm) error {
				var done []string
				err := t.each(ctx, a, func(lib *clientadmin.Admin, addr string) error {
					done = append(done, addr)
					return lib.CreateUser(ctx, addr, u)
				})
				if err != nil {
					return err
				}
				return a.printDone("created user "+u.Username, done)
			})}
		c.Flags().StringVarP(&u.Username, "username", "u", "", "the username")
		c.Flags().StringVarP(&u.Password, "password", "p", "", "the password")
		c.Flags().StringVarP(&u.UserType, "userType", "t", "", "Super or Normal (default Normal)")
		add(c, &t, "username", "password")
	}
	{
		var t acl2Target
		var u clientadmin.UserInfo
		c := &cobra.Command{Use: "updateUser", Short: "Change an ACL 2.0 user's password, type or status (enable, disable)", Args: cobra.NoArgs,
			RunE: run(func(ctx context.Context, a *adm) error {
				var done []string
				err := t.each(ctx, a, func(lib *clientadmin.Admin, addr string) error {
					done = append(done, addr)
					return lib.UpdateUser(ctx, addr, u)
				})
				if err != nil {
					return err
				}
				return a.printDone("updated user "+u.Username, done)
			})}
		c.Flags().StringVarP(&u.Username, "username", "u", "", "the username")
		c.Flags().StringVarP(&u.Password, "password", "p", "", "a new password")
		c.Flags().StringVarP(&u.UserType, "userType", "t", "", "Super or Normal")
		c.Flags().StringVarP(&u.UserStatus, "userStatus", "s", "", "enable or disable")
		add(c, &t, "username")
	}
	{
		var t acl2Target
		var name string
		c := &cobra.Command{Use: "deleteUser", Short: "Delete an ACL 2.0 user and its policies", Args: cobra.NoArgs,
			RunE: run(func(ctx context.Context, a *adm) error {
				var done []string
				err := t.each(ctx, a, func(lib *clientadmin.Admin, addr string) error {
					done = append(done, addr)
					return lib.DeleteUser(ctx, addr, name)
				})
				if err != nil {
					return err
				}
				return a.printDone("deleted user "+name, done)
			})}
		c.Flags().StringVarP(&name, "username", "u", "", "the username")
		add(c, &t, "username")
	}
	{
		var t acl2Target
		var name string
		c := &cobra.Command{Use: "getUser", Short: "Show an ACL 2.0 user (not its password)", Args: cobra.NoArgs,
			RunE: run(func(ctx context.Context, a *adm) error {
				var us []userView
				err := t.each(ctx, a, func(lib *clientadmin.Admin, addr string) error {
					u, found, err := lib.GetUser(ctx, addr, name)
					if found {
						us = append(us, userView{Broker: addr, Username: u.Username, UserType: u.UserType, UserStatus: u.UserStatus})
					}
					return err
				})
				if err != nil {
					return err
				}
				if len(us) == 0 {
					return fmt.Errorf("user %s not found", name)
				}
				return a.printUsers(us)
			})}
		c.Flags().StringVarP(&name, "username", "u", "", "the username")
		add(c, &t, "username")
	}
	{
		var t acl2Target
		var filter string
		c := &cobra.Command{Use: "listUser", Short: "List ACL 2.0 users (not their passwords)", Args: cobra.NoArgs,
			RunE: run(func(ctx context.Context, a *adm) error {
				var us []userView
				err := t.each(ctx, a, func(lib *clientadmin.Admin, addr string) error {
					list, err := lib.ListUsers(ctx, addr, filter)
					for _, u := range list {
						us = append(us, userView{Broker: addr, Username: u.Username, UserType: u.UserType, UserStatus: u.UserStatus})
					}
					return err
				})
				if err != nil {
					return err
				}
				return a.printUsers(us)
			})}
		c.Flags().StringVarP(&filter, "filter", "f", "", "only usernames containing this")
		add(c, &t)
	}

	// Policies.
	for _, name := range []string{"createAcl", "updateAcl"} {
		var t acl2Target
		var subject, resources, actions, ips, decision string
		update := name == "updateAcl"
		c := &cobra.Command{Use: name, Short: "Grant or deny actions on resources to a user (one entry per resource; an entry of the same resource is replaced)", Args: cobra.NoArgs,
			RunE: run(func(ctx context.Context, a *adm) error {
				body, err := aclBody(subject, resources, actions, ips, decision)
				if err != nil {
					return err
				}
				var done []string
				err = t.each(ctx, a, func(lib *clientadmin.Admin, addr string) error {
					done = append(done, addr)
					if update {
						return lib.UpdateACL(ctx, addr, body)
					}
					return lib.CreateACL(ctx, addr, body)
				})
				if err != nil {
					return err
				}
				return a.printDone(fmt.Sprintf("%s %s on %s for %s", decision, actions, resources, subject), done)
			})}
		c.Flags().StringVarP(&subject, "subject", "s", "", "the subject: User:<username>")
		c.Flags().StringVarP(&resources, "resources", "r", "", "resources, comma-separated: Topic:t, Topic:prefix*, Topic:*, Group:g, Cluster:c, *")
		c.Flags().StringVarP(&actions, "actions", "a", "", "actions, comma-separated: Pub, Sub, Create, Update, Delete, Get, List, All")
		c.Flags().StringVarP(&ips, "sourceIp", "i", "", "source addresses or CIDR blocks, comma-separated (default: any)")
		c.Flags().StringVarP(&decision, "decision", "d", "Allow", "Allow or Deny")
		add(c, &t, "subject", "resources", "actions")
	}
	{
		var t acl2Target
		var subject, resources, policyType string
		c := &cobra.Command{Use: "deleteAcl", Short: "Revoke a user's entries of resources (all its policies without -r)", Args: cobra.NoArgs,
			RunE: run(func(ctx context.Context, a *adm) error {
				res := splitComma(resources)
				if len(res) == 0 {
					res = []string{""}
				}
				var done []string
				err := t.each(ctx, a, func(lib *clientadmin.Admin, addr string) error {
					done = append(done, addr)
					for _, r := range res {
						if err := lib.DeleteACL(ctx, addr, subject, policyType, r); err != nil {
							return err
						}
					}
					return nil
				})
				if err != nil {
					return err
				}
				what := "deleted the policies of " + subject
				if resources != "" {
					what = "deleted " + resources + " of " + subject
				}
				return a.printDone(what, done)
			})}
		c.Flags().StringVarP(&subject, "subject", "s", "", "the subject: User:<username>")
		c.Flags().StringVarP(&resources, "resources", "r", "", "resources, comma-separated (default: all)")
		c.Flags().StringVar(&policyType, "policyType", "", "Custom (default) or Default")
		add(c, &t, "subject")
	}
	{
		var t acl2Target
		var subject string
		c := &cobra.Command{Use: "getAcl", Short: "Show a user's policies", Args: cobra.NoArgs,
			RunE: run(func(ctx context.Context, a *adm) error {
				var es []aclEntryView
				err := t.each(ctx, a, func(lib *clientadmin.Admin, addr string) error {
					acl, found, err := lib.GetACL(ctx, addr, subject)
					if found {
						es = append(es, entryViews(addr, []clientadmin.AclInfo{acl})...)
					}
					return err
				})
				if err != nil {
					return err
				}
				return a.printACLs(es)
			})}
		c.Flags().StringVarP(&subject, "subject", "s", "", "the subject: User:<username>")
		add(c, &t, "subject")
	}
	{
		var t acl2Target
		var subject, resource string
		c := &cobra.Command{Use: "listAcl", Short: "List policies, by subject and resource (substrings)", Args: cobra.NoArgs,
			RunE: run(func(ctx context.Context, a *adm) error {
				var es []aclEntryView
				err := t.each(ctx, a, func(lib *clientadmin.Admin, addr string) error {
					list, err := lib.ListACLs(ctx, addr, subject, resource)
					es = append(es, entryViews(addr, list)...)
					return err
				})
				if err != nil {
					return err
				}
				return a.printACLs(es)
			})}
		c.Flags().StringVarP(&subject, "subject", "s", "", "only subjects containing this")
		c.Flags().StringVarP(&resource, "resource", "r", "", "only resources containing this")
		add(c, &t)
	}

	// Copies between brokers.
	{
		var from, to, names string
		c := &cobra.Command{Use: "copyUser", Short: "Copy users from one broker to another (all without -u)", Args: cobra.NoArgs,
			RunE: run(func(ctx context.Context, a *adm) error {
				lib, err := a.library()
				if err != nil {
					return err
				}
				var users []clientadmin.UserInfo
				if want := splitComma(names); len(want) > 0 {
					for _, n := range want {
						u, found, err := lib.GetUser(ctx, from, n)
						if err != nil {
							return err
						}
						if !found {
							return fmt.Errorf("user %s not found on %s", n, from)
						}
						users = append(users, u)
					}
				} else if users, err = lib.ListUsers(ctx, from, ""); err != nil {
					return err
				}
				var done []string
				for _, u := range users {
					if _, found, err := lib.GetUser(ctx, to, u.Username); err != nil {
						return err
					} else if found {
						err = lib.UpdateUser(ctx, to, u)
						if err != nil {
							return err
						}
					} else if err := lib.CreateUser(ctx, to, u); err != nil {
						return err
					}
					done = append(done, u.Username)
				}
				return a.printDone(fmt.Sprintf("copied users %s from %s", strings.Join(done, ","), from), []string{to})
			})}
		c.Flags().StringVarP(&from, "fromBroker", "f", "", "the broker to copy from")
		c.Flags().StringVarP(&to, "toBroker", "t", "", "the broker to copy to")
		c.Flags().StringVarP(&names, "usernames", "u", "", "usernames, comma-separated (default: all)")
		_ = c.MarkFlagRequired("fromBroker")
		_ = c.MarkFlagRequired("toBroker")
		out = append(out, c)
	}
	{
		var from, to, subjects string
		c := &cobra.Command{Use: "copyAcl", Short: "Copy policies from one broker to another (all without -s)", Args: cobra.NoArgs,
			RunE: run(func(ctx context.Context, a *adm) error {
				lib, err := a.library()
				if err != nil {
					return err
				}
				var acls []clientadmin.AclInfo
				if want := splitComma(subjects); len(want) > 0 {
					for _, s := range want {
						acl, found, err := lib.GetACL(ctx, from, s)
						if err != nil {
							return err
						}
						if found {
							acls = append(acls, acl)
						}
					}
				} else if acls, err = lib.ListACLs(ctx, from, "", ""); err != nil {
					return err
				}
				var done []string
				for _, acl := range acls {
					if err := lib.CreateACL(ctx, to, acl); err != nil {
						return err
					}
					done = append(done, acl.Subject)
				}
				return a.printDone(fmt.Sprintf("copied the policies of %s from %s", strings.Join(done, ","), from), []string{to})
			})}
		c.Flags().StringVarP(&from, "fromBroker", "f", "", "the broker to copy from")
		c.Flags().StringVarP(&to, "toBroker", "t", "", "the broker to copy to")
		c.Flags().StringVarP(&subjects, "subjects", "s", "", "subjects, comma-separated (default: all)")
		_ = c.MarkFlagRequired("fromBroker")
		_ = c.MarkFlagRequired("toBroker")
		out = append(out, c)
	}

	// Migration.
	{
		var t acl2Target
		var file string
		c := &cobra.Command{Use: "migrateAuthFromV1", Short: "Create users and policies from a plain_acl.yml (ACL 1.0) on brokers; existing users are left alone", Args: cobra.NoArgs,
			RunE: run(func(ctx context.Context, a *adm) error {
				data, err := os.ReadFile(file)
				if err != nil {
					return usagef("-f: %v", err)
				}
				plan, err := acl2.PlanV1(data)
				if err != nil {
					return fmt.Errorf("%s: %w", file, err)
				}
				res := migrateView{Users: []migratedUser{}, Notes: plan.Notes}
				if res.Notes == nil {
					res.Notes = []string{}
				}
				err = t.each(ctx, a, func(lib *clientadmin.Admin, addr string) error {
					for i, u := range plan.Users {
						if _, found, err := lib.GetUser(ctx, addr, u.Username); err != nil {
							return err
						} else if found {
							res.Users = append(res.Users, migratedUser{Broker: addr, Username: u.Username, Result: "left alone (exists)"})
							continue
						}
						if err := lib.CreateUser(ctx, addr, clientadmin.UserInfo{Username: u.Username, Password: u.Password,
							UserType: string(u.UserType), UserStatus: string(u.UserStatus)}); err != nil {
							return err
						}
						if acl := plan.ACLs[i]; len(acl.Policies) > 0 {
							if err := lib.CreateACL(ctx, addr, toAclInfo(acl)); err != nil {
								return err
							}
						}
						res.Users = append(res.Users, migratedUser{Broker: addr, Username: u.Username, Result: "created " + string(u.UserType)})
					}
					return nil
				})
				if err != nil {
					return err
				}
				for _, n := range res.Notes {
					fmt.Fprintln(os.Stderr, "mq: not migrated:", n)
				}
				rows := make([][]string, 0, len(res.Users))
				for _, u := range res.Users {
					rows = append(rows, []string{u.Broker, u.Username, u.Result})
				}
				return a.print(res, "BROKER\tUSERNAME\tRESULT", rows)
			})}
		c.Flags().StringVarP(&file, "file", "f", "", "the plain_acl.yml")
		add(c, &t, "file")
	}
	return out
}

// migrateView is migrateAuthFromV1's answer.
type migrateView struct {
	Users []migratedUser `json:"users"`
	Notes []string       `json:"notes"` // what ACL 2.0 cannot carry over (white lists)
}

type migratedUser struct {
	Broker   string `json:"broker"`
	Username string `json:"username"`
	Result   string `json:"result"`
}

func toAclInfo(a acl2.ACL) clientadmin.AclInfo {
	out := clientadmin.AclInfo{Subject: a.Subject}
	for _, p := range a.Policies {
		pi := clientadmin.PolicyInfo{PolicyType: p.PolicyType}
		for _, e := range p.Entries {
			pi.Entries = append(pi.Entries, clientadmin.PolicyEntryInfo{Resource: e.Resource, Actions: e.Actions, SourceIPs: e.SourceIPs, Decision: e.Decision})
		}
		out.Policies = append(out.Policies, pi)
	}
	return out
}
