package acl

import (
	"context"
	"fmt"
	"strings"

	"github.com/quivermq/quiver/core/auth"
	"github.com/quivermq/quiver/core/remoting"
)

const (
	retryPrefix = "%RETRY%"
	traceTopic  = "RMQ_SYS_TRACE_TOPIC"
)

// Kind says who may send a request code when ACL is on: the kind of its
// rule in the request-code table (core/remoting's codeRows).
type Kind = remoting.AuthKind

// Kinds (remoting.AuthKind).
const (
	Public         = remoting.AuthPublic
	Resources      = remoting.AuthResources
	AdminOnly      = remoting.AuthAdmin
	AdminOrCluster = remoting.AuthAdminOrCluster
	ClusterOnly    = remoting.AuthCluster
	Refused        = remoting.AuthRefused
	Listed         = remoting.AuthListed
)

// Where a rule's source finds its resource name (remoting.AuthFrom).
const (
	Header = remoting.FromHeader
	Body   = remoting.FromBody
	Stored = remoting.FromStored
)

// Rule is one row of the permission table: who may send a request code.
// The table is core/remoting's request-code table; a code without a row
// is refused.
type Rule struct {
	Code int32
	remoting.AuthRule
}

// Name is the code's Java (or Quiver) name.
func (r Rule) Name() string { return remoting.RequestCodeName(r.Code) }

// Need is one permission a request needs: an action on a resource, or
// auth.Admin with a zero Resource for admin-only codes.
type Need struct {
	Resource auth.Resource
	Action   auth.Action
}

func (n Need) String() string {
	if n.Action == auth.Admin {
		return "ADMIN"
	}
	return fmt.Sprintf("%s on %s", remoting.ActionString(n.Action), resourceString(n.Resource))
}

func resourceString(r auth.Resource) string {
	if r.IsGroup || strings.HasPrefix(r.Name, retryPrefix) {
		return "group " + strings.TrimPrefix(r.Name, retryPrefix)
	}
	return "topic " + r.Name
}

// Rules returns the permission table in code order.
func Rules() []Rule {
	codes := remoting.Codes()
	out := make([]Rule, len(codes))
	for i, c := range codes {
		out[i] = Rule{Code: c.Code, AuthRule: c.Auth}
	}
	return out
}

// RuleFor returns the row of code.
func RuleFor(code int32) (Rule, bool) {
	c, ok := remoting.Code(code)
	return Rule{Code: code, AuthRule: c.Auth}, ok
}

// Required returns the row of req's code and what req needs under a
// Resources row, in the order of the row's sources, without duplicates.
// A code without a row, a malformed request (a missing resource, a body
// that is not JSON) or a stored message that cannot be read is an error
// wrapping auth.ErrDenied.
func Required(ctx context.Context, req auth.Request) (Rule, []Need, error) {
	r, ok := RuleFor(req.Code)
	if !ok {
		return r, nil, &Error{kind: auth.ErrDenied, msg: fmt.Sprintf("request code %d (%s) is not in the permission table: refused", req.Code, remoting.RequestCodeName(req.Code))}
	}
	if r.Kind != Resources {
		return r, nil, nil
	}
	named, err := r.Names(ctx, req, false)
	if err != nil {
		return r, nil, &Error{kind: auth.ErrDenied, msg: fmt.Sprintf("%s (%d): %v", r.Name(), req.Code, err)}
	}
	seen := make(map[Need]bool, len(named))
	needs := make([]Need, 0, len(named))
	for _, n := range named {
		need := topicNeed(n.Name, n.Source.Perm)
		if n.Source.Group {
			need = groupNeed(n.Name, n.Source.Perm)
		}
		if !seen[need] {
			seen[need] = true
			needs = append(needs, need)
		}
	}
	return r, needs, nil
}

// topicNeed classifies a topic: %RETRY%<g> is group g's retry topic and
// needs SUB on group g, whatever the action (sending a message back,
// pulling retries, reading its offsets are all the group's consumption).
func topicNeed(name string, act auth.Action) Need {
	if g, ok := strings.CutPrefix(name, retryPrefix); ok {
		return groupNeed(g, auth.Sub)
	}
	return Need{Resource: auth.Resource{Name: name}, Action: act}
}

func groupNeed(g string, act auth.Action) Need {
	return Need{Resource: auth.Resource{Name: retryPrefix + g, IsGroup: true}, Action: act}
}
