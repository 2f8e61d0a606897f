package main

// The console's ACL 2.0 page (RocketMQ 5.3's users and policies, as
// rocketmq-dashboard 2.x shows them): a broker's users (name, type,
// status; never the password) and policy entries per subject (resource,
// actions, decision, source addresses), and the writes — create, update
// and delete a user, create or update a policy entry, delete an entry or
// all of a subject's — made on every master through client/admin. The
// writes are actions (admin rights, the same-origin and CSRF checks of
// console_security.go, and with console.auth: acl the account's own rights
// at the broker); a delete needs what it deletes typed in confirm. A
// broker without ACL 2.0 answers the AUTH_* codes "not supported": the
// page then says ACL 2.0 is off.

import (
	"context"
	"net/http"
	"strings"

	clientadmin "github.com/quivermq/quiver/client/admin"
	"github.com/quivermq/quiver/plugins/auth/acl/acl2"
)

// acl2View is GET /api/acl2: one broker's users and policy entries.
type acl2View struct {
	Broker  string         `json:"broker"`
	Enabled bool           `json:"enabled"`
	Note    string         `json:"note,omitempty"`
	Users   []userView     `json:"users"`
	ACLs    []aclEntryView `json:"acls"`
}

// acl2Err is a write's error: ACL 2.0 off is a bad request with a clear
// word, a broker's refusal keeps its code and remark.
func acl2Err(err error) error {
	if clientadmin.ACL2Off(err) {
		return badRequest("ACL 2.0 is off on the broker (auth.acl2.enabled: false): %v", codeErr(err))
	}
	return codeErr(err)
}

// acl2Subject is a subject given as User:<name> or a bare username.
func acl2Subject(s string) (string, error) {
	s = strings.TrimSpace(s)
	name := strings.TrimPrefix(s, "User:")
	if name == "" || strings.ContainsAny(name, ": ,") {
		return "", badRequest("subject %q: want User:<username>", s)
	}
	return "User:" + name, nil
}

// acl2User reads a user form; mode create needs a password.
func acl2User(r *http.Request, mode string) (clientadmin.UserInfo, error) {
	u := clientadmin.UserInfo{Username: strings.TrimSpace(r.FormValue("username")), Password: r.FormValue("password"),
		UserType: strings.TrimSpace(r.FormValue("userType")), UserStatus: strings.TrimSpace(r.FormValue("userStatus"))}
	if u.Username == "" || strings.ContainsAny(u.Username, ": ,") {
		return u, badRequest("username %q: want a name without ':', ',' or spaces", u.Username)
	}
	if mode == "create" && u.Password == "" {
		return u, badRequest("give a password for user %s", u.Username)
	}
	switch u.UserType {
	case "", "Super", "Normal":
	default:
		return u, badRequest("userType %q: want Super or Normal", u.UserType)
	}
	switch u.UserStatus {
	case "", "enable", "disable":
	default:
		return u, badRequest("userStatus %q: want enable or disable", u.UserStatus)
	}
	return u, nil
}

func (c *consoleServer) acl2Routes(mux *http.ServeMux) {
	mux.HandleFunc("GET /api/acl2", c.api(func(ctx context.Context, a *adm, r *http.Request) (any, error) {
		addr, err := c.brokerAddr(ctx, a, r.URL.Query().Get("broker"))
		if err != nil {
			return nil, err
		}
		lib, err := a.library()
		if err != nil {
			return nil, err
		}
		v := acl2View{Broker: addr, Enabled: true, Users: []userView{}, ACLs: []aclEntryView{}}
		us, err := lib.ListUsers(ctx, addr, strings.TrimSpace(r.URL.Query().Get("user")))
		if clientadmin.ACL2Off(err) {
			v.Enabled = false
			v.Note = "ACL 2.0 is off on broker " + addr + " (auth.acl2.enabled: false): no users or policies to manage here."
			return v, nil
		}
		if err != nil {
			return nil, codeErr(err)
		}
		for _, u := range us {
			v.Users = append(v.Users, userView{Broker: addr, Username: u.Username, UserType: u.UserType, UserStatus: u.UserStatus})
		}
		acls, err := lib.ListACLs(ctx, addr, strings.TrimSpace(r.URL.Query().Get("subject")), strings.TrimSpace(r.URL.Query().Get("resource")))
		if err != nil {
			return nil, codeErr(err)
		}
		v.ACLs = append(v.ACLs, entryViews(addr, acls)...)
		return v, nil
	}))
	mux.HandleFunc("POST /api/acl2/users", c.action(func(ctx context.Context, a *adm, r *http.Request) (any, error) {
		mode := r.FormValue("mode")
		if mode != "create" && mode != "update" {
			return nil, badRequest("mode %q: want create or update", mode)
		}
		u, err := acl2User(r, mode)
		if err != nil {
			return nil, err
		}
		done, err := c.eachMaster(ctx, a, func(lib *clientadmin.Admin, addr string) error {
			if mode == "create" {
				return lib.CreateUser(ctx, addr, u)
			}
			return lib.UpdateUser(ctx, addr, u)
		})
		if err != nil {
			return nil, acl2Err(err)
		}
		return map[string]any{"username": u.Username, "mode": mode, "done": done}, nil
	}))
	mux.HandleFunc("POST /api/acl2/users/{user}/delete", c.action(func(ctx context.Context, a *adm, r *http.Request) (any, error) {
		name := r.PathValue("user")
		if r.FormValue("confirm") != name {
			return nil, badRequest("confirm the deletion by giving the username in confirm")
		}
		done, err := c.eachMaster(ctx, a, func(lib *clientadmin.Admin, addr string) error { return lib.DeleteUser(ctx, addr, name) })
		if err != nil {
			return nil, acl2Err(err)
		}
		return map[string]any{"deleted": name, "done": done}, nil
	}))
	mux.HandleFunc("POST /api/acl2/acls", c.action(func(ctx context.Context, a *adm, r *http.Request) (any, error) {
		mode := r.FormValue("mode")
		if mode != "create" && mode != "update" {
			return nil, badRequest("mode %q: want create or update", mode)
		}
		subject, err := acl2Subject(r.FormValue("subject"))
		if err != nil {
			return nil, err
		}
		body, err := aclBody(subject, r.FormValue("resources"), r.FormValue("actions"), r.FormValue("sourceIps"), orDefault(strings.TrimSpace(r.FormValue("decision")), "Allow"))
		if err != nil {
			return nil, badRequest("%v", err)
		}
		done, err := c.eachMaster(ctx, a, func(lib *clientadmin.Admin, addr string) error {
			if mode == "create" {
				return lib.CreateACL(ctx, addr, body)
			}
			return lib.UpdateACL(ctx, addr, body)
		})
		if err != nil {
			return nil, acl2Err(err)
		}
		return map[string]any{"subject": subject, "mode": mode, "policy": body, "done": done}, nil
	}))
	mux.HandleFunc("POST /api/acl2/acls/delete", c.action(func(ctx context.Context, a *adm, r *http.Request) (any, error) {
		subject, err := acl2Subject(r.FormValue("subject"))
		if err != nil {
			return nil, err
		}
		resource := strings.TrimSpace(r.FormValue("resource"))
		if resource != "" {
			if _, err := acl2.ParseResource(resource); err != nil {
				return nil, badRequest("resource: %v", err)
			}
		}
		policyType := strings.TrimSpace(r.FormValue("policyType"))
		if policyType != "" && policyType != "Custom" && policyType != "Default" {
			return nil, badRequest("policyType %q: want Custom or Default", policyType)
		}
		want := orDefault(resource, subject) // an entry: its resource; all of a subject's: the subject
		if r.FormValue("confirm") != want {
			return nil, badRequest("confirm the deletion by giving %s in confirm", want)
		}
		done, err := c.eachMaster(ctx, a, func(lib *clientadmin.Admin, addr string) error {
			return lib.DeleteACL(ctx, addr, subject, policyType, resource)
		})
		if err != nil {
			return nil, acl2Err(err)
		}
		return map[string]any{"subject": subject, "resource": resource, "done": done}, nil
	}))
}
