package acl

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
)

// Permission bits, as Java's org.apache.rocketmq.acl.common.Permission.
const (
	PermDeny byte = 1
	PermAny  byte = 2
	PermPub  byte = 4
	PermSub  byte = 8
)

// CheckPermission is Java's Permission.checkPermission: an owned DENY
// refuses; a needed ANY is satisfied by PUB or SUB; otherwise the needed
// and owned bits must share one.
func CheckPermission(needed, owned byte) bool {
	if owned&PermDeny != 0 {
		return false
	}
	if needed&PermAny != 0 {
		return owned&(PermPub|PermSub) != 0
	}
	return needed&owned != 0
}

// parsePerm parses PUB, SUB, PUB|SUB, SUB|PUB and DENY (trimmed). An empty
// value is DENY, like Java. Java also turns any other string into DENY;
// Quiver rejects it so that a typo is reported instead of silently denying.
func parsePerm(s string) (byte, error) {
	switch strings.TrimSpace(s) {
	case "", "DENY":
		return PermDeny, nil
	case "PUB":
		return PermPub, nil
	case "SUB":
		return PermSub, nil
	case "PUB|SUB", "SUB|PUB":
		return PermPub | PermSub, nil
	}
	return 0, fmt.Errorf("permission %q is none of PUB, SUB, PUB|SUB, SUB|PUB, DENY", s)
}

func permString(p byte) string {
	var parts []string
	if p&PermDeny != 0 {
		parts = append(parts, "DENY")
	}
	if p&PermAny != 0 {
		parts = append(parts, "ANY")
	}
	if p&PermPub != 0 {
		parts = append(parts, "PUB")
	}
	if p&PermSub != 0 {
		parts = append(parts, "SUB")
	}
	if len(parts) == 0 {
		return "NONE"
	}
	return strings.Join(parts, "|")
}

// fileYAML is the plain_acl.yml layout.
type fileYAML struct {
	GlobalWhiteRemoteAddresses []string      `yaml:"globalWhiteRemoteAddresses"`
	Accounts                   []accountYAML `yaml:"accounts"`
	// DataVersion is written by Java's admin tools when they update the
	// file; it is accepted and ignored.
	DataVersion any `yaml:"dataVersion"`
}

type accountYAML struct {
	AccessKey          string   `yaml:"accessKey"`
	SecretKey          string   `yaml:"secretKey"`
	WhiteRemoteAddress string   `yaml:"whiteRemoteAddress"`
	Admin              bool     `yaml:"admin"`
	Role               string   `yaml:"role"` // "broker": a cluster member (roles.go)
	DefaultTopicPerm   string   `yaml:"defaultTopicPerm"`
	DefaultGroupPerm   string   `yaml:"defaultGroupPerm"`
	TopicPerms         []string `yaml:"topicPerms"`
	GroupPerms         []string `yaml:"groupPerms"`
}

// account is one loaded account.
type account struct {
	accessKey    string
	secretKey    []byte
	white        addrMatcher
	admin        bool
	cluster      bool // role: broker
	defaultTopic byte
	defaultGroup byte
	// perms holds topic permissions by topic name and group permissions
	// by %RETRY%<group>, in one map as Java does (groupPerms, parsed
	// second, win a clash). It is nil when the account lists none, which
	// is what lets an admin account pass every resource check.
	perms map[string]byte
	// whitePattern is whiteRemoteAddress as written; src the account as
	// the file has it (listings, GET_BROKER_CLUSTER_ACL_CONFIG).
	whitePattern string
	src          accountYAML
}

// rules is one loaded ACL file. It is immutable once built.
type rules struct {
	// globalPatterns is globalWhiteRemoteAddresses as written; order the
	// access keys in file order.
	globalPatterns []string
	order          []string
	global         addrMatcher
	accounts       map[string]*account
	secrets        []string
}

// minKeyLen: Java requires accessKey and secretKey longer than 6 characters.
const minKeyLen = 7

// parseRules loads an ACL file. Unknown keys are errors (Java ignores
// them), except dataVersion. Errors never contain a secret key.
func parseRules(data []byte) (*rules, error) {
	r, err := parseRulesRaw(data)
	if err != nil {
		return nil, redactErr(err, secretCandidates(data))
	}
	return r, nil
}

func parseRulesRaw(data []byte) (*rules, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var f fileYAML
	if err := dec.Decode(&f); err != nil {
		if errors.Is(err, io.EOF) {
			// An empty file is more likely a half-written edit than an
			// intent to refuse everybody; refuse it so the last good
			// rules stay.
			return nil, errors.New("the file is empty (write globalWhiteRemoteAddresses: [] and accounts: [] to allow nobody)")
		}
		return nil, err
	}
	var errs []error
	r := &rules{accounts: map[string]*account{}}
	var err error
	r.globalPatterns = f.GlobalWhiteRemoteAddresses
	if r.global, err = compileAddrs(f.GlobalWhiteRemoteAddresses); err != nil {
		errs = append(errs, fmt.Errorf("globalWhiteRemoteAddresses: %w", err))
	}
	for i, ay := range f.Accounts {
		where := fmt.Sprintf("accounts[%d]", i)
		if utf8.RuneCountInString(ay.AccessKey) < minKeyLen {
			errs = append(errs, fmt.Errorf("%s.accessKey: must be longer than 6 characters", where))
			continue
		}
		where = fmt.Sprintf("accounts[%d] (accessKey %s)", i, ay.AccessKey)
		if utf8.RuneCountInString(ay.SecretKey) < minKeyLen {
			errs = append(errs, fmt.Errorf("%s.secretKey: must be longer than 6 characters", where))
		}
		if _, dup := r.accounts[ay.AccessKey]; dup {
			errs = append(errs, fmt.Errorf("%s: the accessKey is listed twice", where))
			continue
		}
		a := &account{accessKey: ay.AccessKey, secretKey: []byte(ay.SecretKey), admin: ay.Admin}
		r.secrets = append(r.secrets, ay.SecretKey)
		if a.cluster, err = parseRole(ay.Role); err != nil {
			errs = append(errs, fmt.Errorf("%s.role: %w", where, err))
		}
		if a.white, err = compileAddr(ay.WhiteRemoteAddress); err != nil {
			errs = append(errs, fmt.Errorf("%s.whiteRemoteAddress: %w", where, err))
		}
		if a.defaultTopic, err = parsePerm(ay.DefaultTopicPerm); err != nil {
			errs = append(errs, fmt.Errorf("%s.defaultTopicPerm: %w", where, err))
		}
		if a.defaultGroup, err = parsePerm(ay.DefaultGroupPerm); err != nil {
			errs = append(errs, fmt.Errorf("%s.defaultGroupPerm: %w", where, err))
		}
		for j, e := range ay.TopicPerms {
			name, p, err := parseResourcePerm(e)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s.topicPerms[%d]: %w", where, j, err))
				continue
			}
			a.setPerm(name, p)
		}
		for j, e := range ay.GroupPerms {
			name, p, err := parseResourcePerm(e)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s.groupPerms[%d]: %w", where, j, err))
				continue
			}
			a.setPerm(retryPrefix+name, p)
		}
		a.whitePattern, a.src = ay.WhiteRemoteAddress, ay
		r.accounts[a.accessKey] = a
		r.order = append(r.order, a.accessKey)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return r, nil
}

func (a *account) setPerm(name string, p byte) {
	if a.perms == nil {
		a.perms = map[string]byte{}
	}
	a.perms[name] = p
}

// parseResourcePerm parses "name=PERM".
func parseResourcePerm(e string) (string, byte, error) {
	parts := strings.Split(e, "=")
	if len(parts) != 2 || strings.TrimSpace(parts[0]) == "" {
		return "", 0, fmt.Errorf("%q is not name=PERM", e)
	}
	p, err := parsePerm(parts[1])
	if err != nil {
		return "", 0, err
	}
	if strings.TrimSpace(parts[1]) == "" {
		return "", 0, fmt.Errorf("%q has no permission after '='", e)
	}
	return strings.TrimSpace(parts[0]), p, nil
}

// yaml.v3 quotes offending values in backticks ("cannot unmarshal !!str
// `...` into bool"); a misplaced secret could be one of them.
var backticked = regexp.MustCompile("`[^`]*`")

// secretLine finds secretKey values in raw text, so that they can be
// redacted from errors even when the file does not parse.
var secretLine = regexp.MustCompile(`(?m)secretKey["']?\s*:\s*(.*)$`)

func secretCandidates(data []byte) []string {
	var out []string
	for _, m := range secretLine.FindAllSubmatch(data, -1) {
		v := strings.TrimSpace(string(m[1]))
		if i := strings.Index(v, " #"); i >= 0 {
			v = strings.TrimSpace(v[:i])
		}
		v = strings.Trim(v, `"'`)
		if v != "" {
			out = append(out, v)
		}
	}
	return out
}

// redactErr rewrites err's message without quoted YAML values and without
// any of the secrets.
func redactErr(err error, secrets []string) error {
	msg := backticked.ReplaceAllString(err.Error(), "`...`")
	for _, s := range secrets {
		if s != "" {
			msg = strings.ReplaceAll(msg, s, "<redacted>")
		}
	}
	return errors.New(msg)
}
