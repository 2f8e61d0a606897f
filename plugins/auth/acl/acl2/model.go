package acl2

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/quivermq/quiver/core/config"
)

// UserType is a user's kind: a super user passes every authorization.
type UserType string

// User types (Java UserType names).
const (
	Super  UserType = "Super"
	Normal UserType = "Normal"
)

// UserStatus says whether a user may sign in.
type UserStatus string

// User statuses (Java UserStatus names).
const (
	Enable  UserStatus = "enable"
	Disable UserStatus = "disable"
)

// User is an ACL 2.0 user: Username is the AccessKey a client signs
// with, Password its SecretKey. Java's UserInfo is the JSON form.
type User struct {
	Username   string     `json:"username"`
	Password   string     `json:"password,omitempty"`
	UserType   UserType   `json:"userType,omitempty"`
	UserStatus UserStatus `json:"userStatus,omitempty"`
}

// normalize fills Java's defaults (Normal, enable) and checks the names
// (case-insensitive, as Java's getByName).
func (u *User) normalize() error {
	if strings.TrimSpace(u.Username) == "" {
		return fmt.Errorf("username can not be blank")
	}
	switch {
	case u.UserType == "":
		u.UserType = Normal
	case strings.EqualFold(string(u.UserType), string(Super)):
		u.UserType = Super
	case strings.EqualFold(string(u.UserType), string(Normal)):
		u.UserType = Normal
	default:
		return fmt.Errorf("the user type %q is neither Super nor Normal", u.UserType)
	}
	switch {
	case u.UserStatus == "":
		u.UserStatus = Enable
	case strings.EqualFold(string(u.UserStatus), string(Enable)):
		u.UserStatus = Enable
	case strings.EqualFold(string(u.UserStatus), string(Disable)):
		u.UserStatus = Disable
	default:
		return fmt.Errorf("the user status %q is neither enable nor disable", u.UserStatus)
	}
	return nil
}

// ResourceType is what a resource names (Java ResourceType).
type ResourceType string

// Resource types. Any is the resource "*": everything.
const (
	AnyType   ResourceType = "Any"
	Cluster   ResourceType = "Cluster"
	Namespace ResourceType = "Namespace"
	Topic     ResourceType = "Topic"
	Group     ResourceType = "Group"
)

// Pattern is how a resource name matches (Java ResourcePattern).
type Pattern uint8

// Patterns, from the most specific.
const (
	Literal  Pattern = iota + 1 // Topic:orders
	Prefixed                    // Topic:orders*
	AnyName                     // Topic:* (or the resource "*")
)

// Resource is a policy entry's resource, or a request's (always Literal).
type Resource struct {
	Type    ResourceType
	Name    string
	Pattern Pattern
}

// ParseResource parses Java's resource keys: "*", "Topic:*", "Topic:foo*",
// "Topic:foo", with the types Cluster, Namespace, Topic and Group (any
// case).
func ParseResource(key string) (Resource, error) {
	key = strings.TrimSpace(key)
	if key == "" {
		return Resource{}, fmt.Errorf("the resource is null")
	}
	if key == "*" {
		return Resource{Type: AnyType, Pattern: AnyName}, nil
	}
	typ, name, ok := strings.Cut(key, ":")
	if !ok {
		return Resource{}, fmt.Errorf("the resource %q is not Type:name (Cluster, Namespace, Topic, Group) nor *", key)
	}
	var t ResourceType
	for _, c := range []ResourceType{Cluster, Namespace, Topic, Group} {
		if strings.EqualFold(typ, string(c)) {
			t = c
		}
	}
	if t == "" {
		return Resource{}, fmt.Errorf("the resource type of %q is none of Cluster, Namespace, Topic, Group", key)
	}
	switch {
	case name == "*":
		return Resource{Type: t, Pattern: AnyName}, nil
	case strings.HasSuffix(name, "*"):
		name = strings.TrimSuffix(name, "*")
		if name == "" || strings.Contains(name, "*") {
			return Resource{}, fmt.Errorf("the resource %q: * may only end a name", key)
		}
		return Resource{Type: t, Name: name, Pattern: Prefixed}, nil
	case name == "" || strings.Contains(name, "*"):
		return Resource{}, fmt.Errorf("the resource %q has no name (or a * inside it)", key)
	}
	return Resource{Type: t, Name: name, Pattern: Literal}, nil
}

// MustResource is ParseResource for constants; it panics on an error.
func MustResource(key string) Resource {
	r, err := ParseResource(key)
	if err != nil {
		panic(err)
	}
	return r
}

// Key is Java's resource key (getResourceKey).
func (r Resource) Key() string {
	if r.Type == AnyType {
		return "*"
	}
	switch r.Pattern {
	case AnyName:
		return string(r.Type) + ":*"
	case Prefixed:
		return string(r.Type) + ":" + r.Name + "*"
	}
	return string(r.Type) + ":" + r.Name
}

func (r Resource) String() string { return r.Key() }

// Match reports whether the policy resource r covers the request's
// resource x (Java Resource.isMatch).
func (r Resource) Match(x Resource) bool {
	if r.Type == AnyType {
		return true
	}
	if r.Type != x.Type {
		return false
	}
	switch r.Pattern {
	case AnyName:
		return true
	case Prefixed:
		return strings.HasPrefix(x.Name, r.Name)
	}
	return x.Name == r.Name
}

// Action is what a request does (Java Action names).
type Action string

// Actions. All in a policy covers every action; Any is only asked for,
// never granted (a request that any action will do).
const (
	All    Action = "All"
	Any    Action = "Any"
	Pub    Action = "Pub"
	Sub    Action = "Sub"
	Create Action = "Create"
	Update Action = "Update"
	Delete Action = "Delete"
	Get    Action = "Get"
	List   Action = "List"
)

// ParseAction parses an action name, in any case.
func ParseAction(s string) (Action, error) {
	for _, a := range []Action{All, Any, Pub, Sub, Create, Update, Delete, Get, List} {
		if strings.EqualFold(strings.TrimSpace(s), string(a)) {
			return a, nil
		}
	}
	return "", fmt.Errorf("the action %q is none of Pub, Sub, Create, Update, Delete, Get, List, All", s)
}

// Decision is an entry's outcome.
type Decision string

// Decisions (Java Decision names).
const (
	Allow Decision = "Allow"
	Deny  Decision = "Deny"
)

// ParseDecision parses Allow or Deny, in any case.
func ParseDecision(s string) (Decision, error) {
	switch {
	case strings.EqualFold(s, string(Allow)):
		return Allow, nil
	case strings.EqualFold(s, string(Deny)):
		return Deny, nil
	}
	return "", fmt.Errorf("the decision is null or illegal: %q", s)
}

// PolicyType: a subject's Custom policy is consulted first; its Default
// policy only when no Custom entry matches (Java PolicyType).
type PolicyType string

// Policy types.
const (
	Custom  PolicyType = "Custom"
	Default PolicyType = "Default"
)

// ParsePolicyType parses Custom or Default; "" is Custom.
func ParsePolicyType(s string) (PolicyType, error) {
	switch {
	case s == "" || strings.EqualFold(s, string(Custom)):
		return Custom, nil
	case strings.EqualFold(s, string(Default)):
		return Default, nil
	}
	return "", fmt.Errorf("the policy type %q is neither Custom nor Default", s)
}

// Entry is one policy entry: a resource, the actions it grants or
// denies, the source addresses it applies to (none: all) and the
// decision. Its JSON is Java's PolicyEntryInfo.
type Entry struct {
	Resource  string   `json:"resource"`
	Actions   []string `json:"actions"`
	SourceIPs []string `json:"sourceIps,omitempty"`
	Decision  string   `json:"decision"`

	res      Resource
	acts     []Action
	prefixes []netip.Prefix
	dec      Decision
}

// compile parses the entry's fields and writes them back in Java's
// spelling.
func (e *Entry) compile() error {
	r, err := ParseResource(e.Resource)
	if err != nil {
		return err
	}
	if len(e.Actions) == 0 {
		return fmt.Errorf("the actions is empty")
	}
	acts := make([]Action, 0, len(e.Actions))
	for _, s := range e.Actions {
		a, err := ParseAction(s)
		if err != nil {
			return err
		}
		if a == Any {
			return fmt.Errorf("the actions can not be Any")
		}
		if !slices.Contains(acts, a) {
			acts = append(acts, a)
		}
	}
	var prefixes []netip.Prefix
	for _, s := range e.SourceIPs {
		p, err := parseSourceIP(s)
		if err != nil {
			return err
		}
		prefixes = append(prefixes, p)
	}
	d, err := ParseDecision(e.Decision)
	if err != nil {
		return err
	}
	e.res, e.acts, e.prefixes, e.dec = r, acts, prefixes, d
	e.Resource = r.Key()
	e.Actions = make([]string, len(acts))
	for i, a := range acts {
		e.Actions[i] = string(a)
	}
	e.Decision = string(d)
	return nil
}

// parseSourceIP parses an address or a CIDR block.
func parseSourceIP(s string) (netip.Prefix, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return netip.Prefix{}, fmt.Errorf("the source ip is empty")
	}
	p, err := config.ParseIPPrefix(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("the source ip %q is invalid", s)
	}
	return p, nil
}

func (e *Entry) matchAction(want []Action) bool {
	if slices.Contains(want, Any) {
		return true
	}
	if slices.Contains(e.acts, All) {
		return true
	}
	for _, a := range want {
		if slices.Contains(e.acts, a) {
			return true
		}
	}
	return false
}

func (e *Entry) matchSource(ip netip.Addr, known bool) bool {
	if len(e.prefixes) == 0 {
		return true
	}
	if !known {
		return false
	}
	ip = ip.Unmap()
	for _, p := range e.prefixes {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

// Policy is a subject's entries of one type (Java PolicyInfo).
type Policy struct {
	PolicyType string  `json:"policyType"`
	Entries    []Entry `json:"entries"`
}

// ACL is a subject's policies (Java AclInfo). Subject is "User:<name>".
type ACL struct {
	Subject  string   `json:"subject"`
	Policies []Policy `json:"policies"`
}

// compile checks every policy and entry.
func (a *ACL) compile() error {
	if len(a.Policies) == 0 {
		return fmt.Errorf("the policies is empty")
	}
	for i := range a.Policies {
		p := &a.Policies[i]
		t, err := ParsePolicyType(p.PolicyType)
		if err != nil {
			return err
		}
		p.PolicyType = string(t)
		if len(p.Entries) == 0 {
			return fmt.Errorf("the policy entries is empty")
		}
		for j := range p.Entries {
			if err := p.Entries[j].compile(); err != nil {
				return err
			}
		}
	}
	return nil
}

func (a *ACL) policy(t PolicyType) *Policy {
	for i := range a.Policies {
		if a.Policies[i].PolicyType == string(t) {
			return &a.Policies[i]
		}
	}
	return nil
}

// merge adds or replaces entries by resource, per policy type (Java
// Acl.updatePolicy / Policy.updateEntry).
func (a *ACL) merge(in []Policy) {
	for _, np := range in {
		old := a.policy(PolicyType(np.PolicyType))
		if old == nil {
			a.Policies = append(a.Policies, clonePolicy(np))
			continue
		}
		for _, ne := range np.Entries {
			i := slices.IndexFunc(old.Entries, func(e Entry) bool { return e.Resource == ne.Resource })
			if i >= 0 {
				old.Entries[i] = ne
			} else {
				old.Entries = append(old.Entries, ne)
			}
		}
	}
}

// remove deletes the entry of resource from policy t (all of policy t's
// entries when resource is ""), dropping a policy left empty.
func (a *ACL) remove(t PolicyType, resource string) {
	p := a.policy(t)
	if p == nil {
		return
	}
	if resource == "" {
		p.Entries = nil
	} else {
		p.Entries = slices.DeleteFunc(p.Entries, func(e Entry) bool { return e.Resource == resource })
	}
	a.Policies = slices.DeleteFunc(a.Policies, func(p Policy) bool { return len(p.Entries) == 0 })
}

func clonePolicy(p Policy) Policy {
	p.Entries = slices.Clone(p.Entries)
	return p
}

func cloneACL(a ACL) ACL {
	out := ACL{Subject: a.Subject, Policies: make([]Policy, len(a.Policies))}
	for i, p := range a.Policies {
		out.Policies[i] = clonePolicy(p)
	}
	return out
}

// UserSubject is the subject key of a user.
func UserSubject(username string) string { return "User:" + username }

// parseSubject returns the username of a "User:<name>" subject.
func parseSubject(s string) (string, error) {
	typ, name, ok := strings.Cut(strings.TrimSpace(s), ":")
	if !ok || !strings.EqualFold(typ, "User") || name == "" {
		return "", fmt.Errorf("the subject %q is not User:<username>", s)
	}
	return name, nil
}
