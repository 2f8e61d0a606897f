package acl2

import (
	"context"
	"encoding/json"
	"errors"
	"strings"

	"github.com/quivermq/quiver/core/auth"
	"github.com/quivermq/quiver/core/remoting"
	"github.com/quivermq/quiver/plugins/auth/acl"
)

// invalidParameter is Java's ResponseCode.INVALID_PARAMETER.
const invalidParameter int32 = 29

// Answer serves the AUTH_* codes (RocketMQ 5.3's AdminBrokerProcessor
// createUser … listAcl, same headers, JSON bodies, codes and remarks)
// once the request passed Check (Cluster Update, or Get for reads); other
// codes pass on (nil). The kernel guard calls it. A refused change
// answers NO_PERMISSION with Java's message; a blank username
// INVALID_PARAMETER.
func (p *Plugin) Answer(ctx context.Context, _ *remoting.Peer, req *remoting.Command, pr auth.Principal) *remoting.Command {
	if _, ok := authAction(req.Code); !ok {
		return nil
	}
	resp, err := p.serve(req, pr)
	if err != nil {
		var se *StoreError
		code := remoting.NoPermission
		if !errors.As(err, &se) && !errors.Is(err, errRefused) {
			code = remoting.SystemError
		}
		p.log.WarnContext(ctx, "acl2: admin refused", "request", remoting.RequestCodeName(req.Code), "user", pr.AccessKey, "err", err)
		return remoting.NewResponse(req, code, strings.TrimPrefix(err.Error(), "acl2: "))
	}
	if resp.Code == remoting.Success && isChange(req.Code) {
		p.log.InfoContext(ctx, "acl2: changed", "request", remoting.RequestCodeName(req.Code), "user", pr.AccessKey,
			"subject", req.Ext("username")+req.Ext("subject"), "version", p.store.Version())
	}
	return resp
}

var errRefused = errors.New("refused")

func isChange(code int32) bool { a, _ := authAction(code); return a == Update }

// superCaller is Java's !isNotSuperUserLogin: a request without an
// AccessKey (authentication off), the process's own, or a super user's.
func (p *Plugin) superCaller(req *remoting.Command, pr auth.Principal) bool {
	ak := req.Ext(acl.KeyAccessKey)
	if ak == "" || pr.Trusted {
		return true
	}
	u, ok := p.store.GetUser(ak)
	return ok && u.UserType == Super
}

func (p *Plugin) serve(req *remoting.Command, pr auth.Principal) (*remoting.Command, error) {
	ok := func(body any) (*remoting.Command, error) {
		resp := remoting.NewResponse(req, remoting.Success, "")
		if body != nil {
			raw, err := json.Marshal(body)
			if err != nil {
				return nil, err
			}
			resp.Body = raw
		}
		return resp, nil
	}
	refuse := func(msg string) error { return &StoreError{kind: errRefused, msg: msg} }
	switch req.Code {
	case remoting.AuthCreateUser, remoting.AuthUpdateUser:
		name := req.Ext("username")
		if name == "" {
			return remoting.NewResponse(req, invalidParameter, "The username is blank"), nil
		}
		var u User
		if len(req.Body) > 0 {
			if err := json.Unmarshal(req.Body, &u); err != nil {
				return nil, refuse("the body is not a UserInfo: " + err.Error())
			}
		}
		u.Username = name
		super := p.superCaller(req, pr)
		if strings.EqualFold(string(u.UserType), string(Super)) && !super {
			if req.Code == remoting.AuthCreateUser {
				return remoting.NewResponse(req, remoting.SystemError, "The super user can only be create by super user"), nil
			}
			return remoting.NewResponse(req, remoting.SystemError, "The super user can only be update by super user"), nil
		}
		if req.Code == remoting.AuthCreateUser {
			if err := p.store.CreateUser(u); err != nil {
				return nil, err
			}
			return ok(nil)
		}
		if old, found := p.store.GetUser(name); found && old.UserType == Super && !super {
			return nil, refuse("The super user can only be update by super user")
		}
		if err := p.store.UpdateUser(u); err != nil {
			return nil, err
		}
		return ok(nil)
	case remoting.AuthDeleteUser:
		name := req.Ext("username")
		if old, found := p.store.GetUser(name); found && old.UserType == Super && !p.superCaller(req, pr) {
			return nil, refuse("The super user can only be update by super user")
		}
		if err := p.store.DeleteUser(name); err != nil {
			return nil, err
		}
		return ok(nil)
	case remoting.AuthGetUser:
		name := strings.TrimSpace(req.Ext("username"))
		if name == "" {
			return remoting.NewResponse(req, invalidParameter, "The username is blank"), nil
		}
		if u, found := p.store.GetUser(name); found {
			return ok(u)
		}
		return ok(nil)
	case remoting.AuthListUser:
		if us := p.store.ListUsers(req.Ext("filter")); len(us) > 0 {
			return ok(us)
		}
		return ok(nil)
	case remoting.AuthCreateACL, remoting.AuthUpdateACL:
		var a ACL
		if len(req.Body) > 0 {
			if err := json.Unmarshal(req.Body, &a); err != nil {
				return nil, refuse("the body is not an AclInfo: " + err.Error())
			}
		}
		if len(a.Policies) == 0 {
			return nil, refuse("The body of acl is null")
		}
		if a.Subject == "" {
			a.Subject = req.Ext("subject")
		}
		if err := p.store.PutACL(a); err != nil {
			return nil, err
		}
		return ok(nil)
	case remoting.AuthDeleteACL:
		t, err := ParsePolicyType(req.Ext("policyType"))
		if err != nil {
			return nil, refuse(err.Error())
		}
		if err := p.store.DeleteACL(req.Ext("subject"), t, strings.TrimSpace(req.Ext("resource"))); err != nil {
			return nil, err
		}
		return ok(nil)
	case remoting.AuthGetACL:
		a, found, err := p.store.GetACL(req.Ext("subject"))
		if err != nil {
			return nil, err
		}
		if found {
			return ok(a)
		}
		return ok(nil)
	case remoting.AuthListACL:
		if as := p.store.ListACLs(req.Ext("subjectFilter"), req.Ext("resourceFilter")); len(as) > 0 {
			return ok(as)
		}
		return ok(nil)
	}
	return nil, nil
}
