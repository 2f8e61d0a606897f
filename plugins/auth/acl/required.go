package acl

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"unicode"

	"github.com/quivermq/quiver/core/auth"
	"github.com/quivermq/quiver/core/remoting"
)

const (
	retryPrefix = "%RETRY%"
	traceTopic  = "RMQ_SYS_TRACE_TOPIC"
)

// Kind says who may send a request code when ACL is on.
type Kind uint8

// Kinds, from the most open to the most closed.
const (
	// Public: any account with a valid signature; no permission. Rule.Reason
	// says why the code needs none.
	Public Kind = iota + 1
	// Resources: the permissions Rule.Needs lists, on the topics and groups
	// the request names (an admin account that lists no topicPerms and no
	// groupPerms has them all, as in Java).
	Resources
	// AdminOnly: an account with admin: true.
	AdminOnly
	// AdminOrCluster: an admin account or a cluster member (what a slave
	// copies from its master).
	AdminOrCluster
	// ClusterOnly: a cluster member (an account with role: broker, or the
	// broker of the same `mq dev` process); never an ordinary account,
	// admin included.
	ClusterOnly
	// Refused: a code clients serve, not brokers or name servers; nobody
	// may send it to a server.
	Refused
	// Listed: any signed account; the answer, a list of topics, is narrowed
	// to the topics (and groups' retry topics) the account holds a
	// permission on. Admin accounts and cluster members see all.
	Listed
)

func (k Kind) String() string {
	switch k {
	case Public:
		return "public"
	case Resources:
		return "resources"
	case AdminOnly:
		return "admin"
	case AdminOrCluster:
		return "admin or cluster"
	case ClusterOnly:
		return "cluster"
	case Refused:
		return "refused"
	case Listed:
		return "listed"
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// From says where a Source finds its resource name.
type From uint8

// Places a resource name comes from.
const (
	// Header: the extFields value named Source.Path.
	Header From = iota + 1
	// Body: the JSON body at Source.Path, dot-separated keys, "[]" after a
	// key for each element of an array ("mqSet[].topic"). Keys match
	// case-insensitively, as encoding/json's struct decoding does in the
	// processors; two spellings of one key with different values refuse.
	Body
	// Stored: the topic of the message stored at the commit-log offset in
	// the extFields value named Source.Path.
	Stored
)

// Source is one resource a request names and the permission it needs
// there.
type Source struct {
	From From
	Path string
	// Group: the name is a consumer or producer group, not a topic.
	Group bool
	// Perm is auth.Pub, auth.Sub or auth.Any (either).
	Perm auth.Action
	// Optional: an absent (empty) value needs nothing. Otherwise a request
	// without it is refused.
	Optional bool
	// Real (Stored only): a message parked under a system topic (a
	// transaction's half message, a delayed message) counts under its
	// REAL_TOPIC.
	Real bool
	// Skip is a name that needs nothing (CLIENT_INNER_PRODUCER, the group
	// of the producer every Java client instance runs for sending back).
	Skip string
}

func (s Source) String() string {
	res := "topic"
	if s.Group {
		res = "group"
	}
	var where string
	switch s.From {
	case Header:
		where = "header `" + s.Path + "`"
	case Body:
		where = "body `" + s.Path + "`"
	case Stored:
		where = "the message at commit-log offset header `" + s.Path + "`"
		if s.Real {
			where += " (its REAL_TOPIC)"
		}
		res = "topic of"
	}
	out := fmt.Sprintf("%s on %s %s", actionString(s.Perm), res, where)
	if s.Skip != "" {
		out += " (but " + s.Skip + ")"
	}
	if s.Optional {
		out += " if present"
	}
	return out
}

// Rule is one row of the permission table: who may send a request code.
type Rule struct {
	Code int32
	Kind Kind
	// Needs are the permissions of a Resources rule.
	Needs []Source
	// Reason says why a Public or Refused code is open or closed, or notes
	// a difference from Java.
	Reason string
}

// Name is the code's Java (or Quiver) name.
func (r Rule) Name() string { return remoting.RequestCodeName(r.Code) }

// Describe is the rule in one line (docs/SECURITY.md).
func (r Rule) Describe() string {
	var out string
	switch r.Kind {
	case Resources:
		parts := make([]string, len(r.Needs))
		for i, s := range r.Needs {
			parts[i] = s.String()
		}
		out = strings.Join(parts, "; ")
	case Public:
		out = "any signed account"
	case AdminOnly:
		out = "admin account"
	case AdminOrCluster:
		out = "admin account or cluster member"
	case ClusterOnly:
		out = "cluster member only (`role: broker`), never an ordinary account"
	case Refused:
		out = "refused"
	case Listed:
		out = "any signed account; the list holds only the topics it has a permission on (admin accounts and cluster members: all)"
	}
	if r.Reason != "" {
		out += " — " + r.Reason
	}
	return out
}

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
	return fmt.Sprintf("%s on %s", actionString(n.Action), resourceString(n.Resource))
}

func actionString(a auth.Action) string {
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
	return permString(byte(a))
}

func resourceString(r auth.Resource) string {
	if r.IsGroup || strings.HasPrefix(r.Name, retryPrefix) {
		return "group " + strings.TrimPrefix(r.Name, retryPrefix)
	}
	return "topic " + r.Name
}

// Rules returns the permission table in code order. Every request code a
// broker or name server routes has a row; with ACL on, a code without one
// is refused.
func Rules() []Rule {
	out := make([]Rule, 0, len(table))
	for _, r := range table {
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Code < out[j].Code })
	return out
}

// RuleFor returns the row of code.
func RuleFor(code int32) (Rule, bool) {
	r, ok := table[code]
	return r, ok
}

// Required returns the row of req's code and what req needs under a
// Resources row, in the order of the row's sources, without duplicates.
// A code without a row, a malformed request (a missing resource, a body
// that is not JSON) or a stored message that cannot be read is an error
// wrapping auth.ErrDenied.
func Required(ctx context.Context, req auth.Request) (Rule, []Need, error) {
	r, ok := table[req.Code]
	if !ok {
		return r, nil, &Error{kind: auth.ErrDenied, msg: fmt.Sprintf("request code %d (%s) is not in the permission table: refused", req.Code, remoting.RequestCodeName(req.Code))}
	}
	if r.Kind != Resources {
		return r, nil, nil
	}
	needs, err := r.resolve(ctx, req)
	if err != nil {
		return r, nil, &Error{kind: auth.ErrDenied, msg: fmt.Sprintf("%s (%d): %v", r.Name(), req.Code, err)}
	}
	return r, dedupe(needs), nil
}

func (r Rule) resolve(ctx context.Context, req auth.Request) ([]Need, error) {
	var out []Need
	var doc *jsonDoc
	for _, s := range r.Needs {
		var names []string
		switch s.From {
		case Header:
			if v := req.ExtFields[s.Path]; v != "" {
				names = []string{v}
			}
		case Body:
			if doc == nil {
				d, err := parseDoc(req.Body)
				if err != nil {
					return nil, err
				}
				doc = d
			}
			vs, err := doc.strings(s.Path, s.Optional)
			if err != nil {
				return nil, err
			}
			if len(vs) == 0 && strings.Contains(s.Path, "[]") {
				continue // an empty list (a heartbeat of producers only) names nothing
			}
			names = vs
		case Stored:
			t, err := storedTopic(ctx, req, s)
			if err != nil {
				return nil, err
			}
			names = []string{t}
		}
		if len(names) == 0 {
			if s.Optional {
				continue
			}
			return nil, fmt.Errorf("the %s field is missing", s.Path)
		}
		out = appendNeeds(out, s, names)
	}
	return out, nil
}

func appendNeeds(out []Need, s Source, names []string) []Need {
	for _, n := range names {
		if s.Skip != "" && n == s.Skip {
			continue
		}
		if s.Group {
			out = append(out, groupNeed(n, s.Perm))
		} else {
			out = append(out, topicNeed(n, s.Perm))
		}
	}
	return out
}

// storedTopic reads the topic of the message at the offset in header
// s.Path, parsing the offset as the processors do.
func storedTopic(ctx context.Context, req auth.Request, s Source) (string, error) {
	e := remoting.ReadExt(&remoting.Command{ExtFields: req.ExtFields})
	off := e.Int64(s.Path)
	if e.Err != nil {
		return "", fmt.Errorf("the %s field: %v", s.Path, e.Err)
	}
	if req.Lookup == nil {
		return "", fmt.Errorf("this server cannot read the message at offset %d", off)
	}
	m, err := req.Lookup(ctx, off)
	if err != nil || m.Topic == "" {
		return "", fmt.Errorf("no message at commit-log offset %d", off)
	}
	if s.Real && m.RealTopic != "" {
		return m.RealTopic, nil
	}
	return m.Topic, nil
}

func dedupe(ns []Need) []Need {
	seen := make(map[Need]bool, len(ns))
	out := ns[:0]
	for _, n := range ns {
		if !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	return out
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

// jsonDoc is a parsed body.
type jsonDoc struct{ v any }

func parseDoc(body []byte) (*jsonDoc, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	v, err := decodeValue(dec, 0)
	if err != nil {
		return nil, fmt.Errorf("the body is not JSON%s", err.detail)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("the body is not one JSON value")
	}
	return &jsonDoc{v: v}, nil
}

// docError is why a body does not parse; detail is "" or ": <reason>".
type docError struct{ detail string }

// maxDepth bounds the nesting a body may have.
const maxDepth = 64

// decodeValue reads one JSON value. An object that spells a key twice,
// exactly or in another case, is refused: encoding/json, which the
// processors use, keeps the last value and matches keys without regard
// to case, so a check reading the first would see another name.
func decodeValue(dec *json.Decoder, depth int) (any, *docError) {
	if depth > maxDepth {
		return nil, &docError{": nested too deep"}
	}
	tok, err := dec.Token()
	if err != nil {
		return nil, &docError{}
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			obj := map[string]any{}
			folded := map[string]bool{}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, &docError{}
				}
				k, _ := kt.(string)
				f := foldKey(k)
				if folded[f] {
					return nil, &docError{fmt.Sprintf(": key %q is spelt twice", k)}
				}
				folded[f] = true
				v, derr := decodeValue(dec, depth+1)
				if derr != nil {
					return nil, derr
				}
				obj[k] = v
			}
			if _, err := dec.Token(); err != nil {
				return nil, &docError{}
			}
			return obj, nil
		case '[':
			arr := []any{}
			for dec.More() {
				v, derr := decodeValue(dec, depth+1)
				if derr != nil {
					return nil, derr
				}
				arr = append(arr, v)
			}
			if _, err := dec.Token(); err != nil {
				return nil, &docError{}
			}
			return arr, nil
		}
		return nil, &docError{}
	}
	return tok, nil
}

// strings returns the strings at path (see Body). A missing or null list
// ("key[]") holds nothing; a missing, null or empty value, or one that is
// not a string, is an error unless optional.
func (d *jsonDoc) strings(path string, optional bool) ([]string, error) {
	cur := []any{d.v}
	for _, seg := range strings.Split(path, ".") {
		key, each := strings.CutSuffix(seg, "[]")
		var next []any
		for _, c := range cur {
			obj, ok := c.(map[string]any)
			if !ok {
				return nil, fmt.Errorf("the body has no object holding %s", path)
			}
			v, found, err := foldGet(obj, key)
			if err != nil {
				return nil, fmt.Errorf("the body's %s: %v", path, err)
			}
			switch {
			case each && (!found || v == nil):
			case each:
				arr, ok := v.([]any)
				if !ok {
					return nil, fmt.Errorf("the body's %s is not a list", key)
				}
				next = append(next, arr...)
			case !found || v == nil:
				if !optional {
					return nil, fmt.Errorf("the body has no %s", path)
				}
			default:
				next = append(next, v)
			}
		}
		cur = next
	}
	out := make([]string, 0, len(cur))
	for _, c := range cur {
		s, ok := c.(string)
		if !ok || s == "" {
			return nil, fmt.Errorf("the body has no %s", path)
		}
		out = append(out, s)
	}
	return out, nil
}

// foldGet finds key in obj the way encoding/json fills a struct field:
// any key equal under case folding. Two such keys with different values
// are refused, so that this check and a processor cannot read different
// names from one body.
func foldGet(obj map[string]any, key string) (any, bool, error) {
	var v any
	found := false
	for k, x := range obj {
		if !strings.EqualFold(k, key) {
			continue
		}
		if found && !sameJSON(v, x) {
			return nil, false, fmt.Errorf("key %s is spelt twice with different values", key)
		}
		v, found = x, true
	}
	return v, found, nil
}

func sameJSON(a, b any) bool {
	x, err1 := json.Marshal(a)
	y, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && bytes.Equal(x, y)
}

// foldKey maps a key to one spelling of its case-folding class (each rune
// to the least of its unicode.SimpleFold orbit), so that two keys
// strings.EqualFold calls equal fold to the same string.
func foldKey(k string) string {
	b := make([]rune, 0, len(k))
	for _, r := range k {
		least := r
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			if f < least {
				least = f
			}
		}
		b = append(b, least)
	}
	return string(b)
}
