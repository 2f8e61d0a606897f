package acl

import "strings"

// V1Account is one account of a plain_acl.yml as this plugin enforces
// it, for ACL 2.0's migration (plugins/auth/acl/acl2).
type V1Account struct {
	AccessKey, SecretKey string
	Admin                bool
	Broker               bool // role: broker
	WhiteRemoteAddress   string
	// DefaultTopic and DefaultGroup are the default permissions
	// (PermDeny, PermPub|PermSub, ...; an absent default is PermDeny).
	DefaultTopic, DefaultGroup byte
	// Topics and Groups are the listed permissions by topic and group
	// name; both nil when the account lists none (an admin account then
	// has every resource).
	Topics, Groups map[string]byte
}

// V1File is a parsed plain_acl.yml.
type V1File struct {
	GlobalWhiteRemoteAddresses []string
	Accounts                   []V1Account // in file order
}

// ParseV1 parses and checks a plain_acl.yml as New loads it.
func ParseV1(data []byte) (V1File, error) {
	r, err := parseRules(data)
	if err != nil {
		return V1File{}, err
	}
	out := V1File{GlobalWhiteRemoteAddresses: append([]string(nil), r.globalPatterns...)}
	for _, ak := range r.order {
		a := r.accounts[ak]
		v := V1Account{AccessKey: a.accessKey, SecretKey: string(a.secretKey), Admin: a.admin, Broker: a.cluster,
			WhiteRemoteAddress: a.whitePattern, DefaultTopic: a.defaultTopic, DefaultGroup: a.defaultGroup}
		if a.perms != nil {
			v.Topics, v.Groups = map[string]byte{}, map[string]byte{}
			for name, p := range a.perms {
				if g, ok := strings.CutPrefix(name, retryPrefix); ok {
					v.Groups[g] = p
				} else {
					v.Topics[name] = p
				}
			}
		}
		out.Accounts = append(out.Accounts, v)
	}
	return out, nil
}
