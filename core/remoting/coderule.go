package remoting

import (
	"fmt"
	"strings"

	"github.com/quivermq/quiver/core/auth"
)

// AuthKind says who may send a request code when authorization is on.
type AuthKind uint8

// Kinds, from the most open to the most closed.
const (
	// AuthPublic: any authenticated sender; no permission. AuthRule.Reason
	// says why the code needs none.
	AuthPublic AuthKind = iota + 1
	// AuthResources: the permissions AuthRule.Needs lists, on the topics
	// and groups the request names (an ACL 1.0 admin account that lists no
	// topicPerms and no groupPerms has them all, as in Java).
	AuthResources
	// AuthAdmin: an admin account.
	AuthAdmin
	// AuthAdminOrCluster: an admin account or a cluster member (what a
	// slave copies from its master).
	AuthAdminOrCluster
	// AuthCluster: a cluster member (a broker account, or the broker of the
	// same `mq dev` process); never an ordinary account, admin included.
	AuthCluster
	// AuthRefused: a code clients serve, not brokers or name servers;
	// nobody may send it to a server.
	AuthRefused
	// AuthListed: any authenticated sender; the answer, a list of topics,
	// is narrowed to the topics (and groups' retry topics) it holds a
	// permission on. Admin accounts and cluster members see all.
	AuthListed
)

func (k AuthKind) String() string {
	switch k {
	case AuthPublic:
		return "public"
	case AuthResources:
		return "resources"
	case AuthAdmin:
		return "admin"
	case AuthAdminOrCluster:
		return "admin or cluster"
	case AuthCluster:
		return "cluster"
	case AuthRefused:
		return "refused"
	case AuthListed:
		return "listed"
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// AuthFrom says where an AuthSource finds its resource name.
type AuthFrom uint8

// Places a resource name comes from.
const (
	// FromHeader: the extFields value named AuthSource.Path.
	FromHeader AuthFrom = iota + 1
	// FromBody: the JSON body at AuthSource.Path, dot-separated keys, "[]"
	// after a key for each element of an array ("mqSet[].topic"). Keys
	// match case-insensitively, as encoding/json's struct decoding does in
	// the processors; two spellings of one key with different values
	// refuse.
	FromBody
	// FromStored: the topic of the message stored at the commit-log offset
	// in the extFields value named AuthSource.Path.
	FromStored
)

// AuthSource is one resource a request names and the permission it needs
// there.
type AuthSource struct {
	From AuthFrom
	Path string
	// Group: the name is a consumer or producer group, not a topic.
	Group bool
	// Perm is auth.Pub, auth.Sub or auth.Any (either).
	Perm auth.Action
	// Optional: an absent (empty) value needs nothing. Otherwise a request
	// without it is refused.
	Optional bool
	// Real (FromStored only): a message parked under a system topic (a
	// transaction's half message, a delayed message) counts under its
	// REAL_TOPIC.
	Real bool
}

func (s AuthSource) String() string {
	res := "topic"
	if s.Group {
		res = "group"
	}
	var where string
	switch s.From {
	case FromHeader:
		where = "header `" + s.Path + "`"
	case FromBody:
		where = "body `" + s.Path + "`"
	case FromStored:
		where = "the message at commit-log offset header `" + s.Path + "`"
		if s.Real {
			where += " (its REAL_TOPIC)"
		}
		res = "topic of"
	}
	out := fmt.Sprintf("%s on %s %s", ActionString(s.Perm), res, where)
	if s.Optional {
		out += " if present"
	}
	return out
}

// ActionString names an action as RocketMQ's ACL does (PUB, SUB, ADMIN).
func ActionString(a auth.Action) string {
	switch a {
	case auth.Pub:
		return "PUB"
	case auth.Sub:
		return "SUB"
	case auth.Any:
		return "PUB or SUB"
	case auth.Admin:
		return "ADMIN"
	}
	return fmt.Sprintf("Action(%d)", uint8(a))
}

// AuthRule is who may send a request code when authorization is on.
// Compared with Java 4.9.8's ACL:
//
//   - Every topic named %RETRY%<g> needs SUB on group g instead of the
//     topic's permission: sending a message back, pulling retries and
//     reading their offsets are all that group's consumption (Java reads
//     a "group" ext field SEND_MESSAGE never carries and checks the group
//     "null").
//   - SEND_BATCH_MESSAGE, QUERY_CONSUMER_OFFSET, the offset queries, the
//     lock codes, END_TRANSACTION, VIEW_MESSAGE_BY_ID and the consumer
//     information codes check their topic or group (Java: the signature
//     only).
//   - Cluster traffic (REGISTER_BROKER, UNREGISTER_BROKER, HA_PULL, the
//     controller's heartbeats, QUERY_DATA_VERSION) needs a cluster member,
//     and reads of cluster-wide data an admin (Java's name server checks
//     nothing).
//   - A resource a row needs but the request lacks refuses it (Java checks
//     a resource named "null"), except where a source is Optional.
type AuthRule struct {
	Kind AuthKind
	// Needs are the permissions of an AuthResources rule.
	Needs []AuthSource
	// Reason says why a public or refused code is open or closed, or
	// notes a difference from Java.
	Reason string
}

// Describe is the rule in one line (docs/SECURITY.md).
func (r AuthRule) Describe() string {
	var out string
	switch r.Kind {
	case AuthResources:
		parts := make([]string, len(r.Needs))
		for i, s := range r.Needs {
			parts[i] = s.String()
		}
		out = strings.Join(parts, "; ")
	case AuthPublic:
		out = "any signed account"
	case AuthAdmin:
		out = "admin account"
	case AuthAdminOrCluster:
		out = "admin account or cluster member"
	case AuthCluster:
		out = "cluster member only (`role: broker`), never an ordinary account"
	case AuthRefused:
		out = "refused"
	case AuthListed:
		out = "any signed account; the list holds only the topics it has a permission on (admin accounts and cluster members: all)"
	}
	if r.Reason != "" {
		out += " — " + r.Reason
	}
	return out
}

// Constructors of the table's rules.
func res(reason string, needs ...AuthSource) AuthRule {
	return AuthRule{Kind: AuthResources, Needs: needs, Reason: reason}
}
func only(k AuthKind, reason string) AuthRule { return AuthRule{Kind: k, Reason: reason} }
func hTopic(key string, p auth.Action) AuthSource {
	return AuthSource{From: FromHeader, Path: key, Perm: p}
}
func hGroup(key string, p auth.Action) AuthSource {
	return AuthSource{From: FromHeader, Path: key, Group: true, Perm: p}
}
func optional(s AuthSource) AuthSource { s.Optional = true; return s }
func bTopic(path string) AuthSource    { return AuthSource{From: FromBody, Path: path, Perm: auth.Sub} }
func bGroup(path string) AuthSource {
	return AuthSource{From: FromBody, Path: path, Group: true, Perm: auth.Sub}
}
func stored(key string, p auth.Action) AuthSource {
	return AuthSource{From: FromStored, Path: key, Perm: p}
}
