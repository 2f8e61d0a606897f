package acl

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"

	"github.com/quivermq/quiver/core/auth"
	"github.com/quivermq/quiver/core/remoting"
)

// Account administration over the wire (auth.AccountAdmin), as Java's
// PlainPermissionManager: updateAccessConfig, deleteAccessConfig,
// updateGlobalWhiteAddrsConfig and getAllAclConfig. An edit reads the ACL
// file, changes its YAML tree (comments and the order of keys survive),
// checks that the result loads, writes it atomically (a temporary file,
// fsync, rename, fsync of the directory) and installs the new rules at
// once. Edits are serialized; an edit that would not load is refused and
// the file is left as it was.

var _ auth.AccountAdmin = (*ACL)(nil)

// AuthorizeAdmin implements auth.AccountAdmin: the sender must be an admin
// account with a valid signature, or a white-listed address unless
// auth.acl.strict_white_list is on (then a white-listed account must be an
// admin and sign).
func (a *ACL) AuthorizeAdmin(_ context.Context, req auth.Request) error {
	p, err := a.authenticate(a.rules.Load(), req, false, a.strictWhite)
	if err != nil {
		return err
	}
	if p.Admin || (p.Trusted && !a.strictWhite) {
		return nil
	}
	return denied("no permission: admin required for request code %d (%s) for accessKey %s", req.Code, remoting.RequestCodeName(req.Code), p.AccessKey)
}

// UpdateAccount implements auth.AccountAdmin.
func (a *ACL) UpdateAccount(_ context.Context, u auth.AccountUpdate) error {
	if utf8.RuneCountInString(u.AccessKey) < minKeyLen || utf8.RuneCountInString(u.SecretKey) < minKeyLen {
		//lint:ignore ST1005 the remark is Java's text, which tools match
		return fmt.Errorf("The accessKey=%s and secretKey cannot be null and length should longer than 6", u.AccessKey)
	}
	for _, p := range [][]string{u.TopicPerms, u.GroupPerms} {
		for _, e := range p {
			if _, _, err := parseResourcePerm(e); err != nil {
				return err
			}
		}
	}
	return a.edit(func(root *yaml.Node) error {
		accounts := mapValue(root, "accounts")
		if accounts == nil || accounts.Kind != yaml.SequenceNode {
			accounts = &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq"}
			mapSet(root, "accounts", accounts)
		}
		var acct *yaml.Node
		for _, it := range accounts.Content {
			if k := mapValue(it, "accessKey"); it.Kind == yaml.MappingNode && k != nil && k.Value == u.AccessKey {
				acct = it
				break
			}
		}
		if acct == nil {
			acct = &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
			accounts.Content = append(accounts.Content, acct)
			mapSet(acct, "accessKey", str(u.AccessKey))
		}
		mapSet(acct, "secretKey", str(u.SecretKey))
		if u.WhiteRemoteAddress != nil {
			mapSet(acct, "whiteRemoteAddress", str(*u.WhiteRemoteAddress))
		}
		mapSet(acct, "admin", &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!bool", Value: fmt.Sprint(u.Admin)})
		if u.DefaultTopicPerm != "" {
			mapSet(acct, "defaultTopicPerm", str(u.DefaultTopicPerm))
		}
		if u.DefaultGroupPerm != "" {
			mapSet(acct, "defaultGroupPerm", str(u.DefaultGroupPerm))
		}
		if u.TopicPerms != nil {
			mapSet(acct, "topicPerms", strs(u.TopicPerms))
		}
		if u.GroupPerms != nil {
			mapSet(acct, "groupPerms", strs(u.GroupPerms))
		}
		return nil
	})
}

// DeleteAccount implements auth.AccountAdmin.
func (a *ACL) DeleteAccount(_ context.Context, accessKey string) error {
	return a.edit(func(root *yaml.Node) error {
		accounts := mapValue(root, "accounts")
		if accounts != nil && accounts.Kind == yaml.SequenceNode {
			for i, it := range accounts.Content {
				if k := mapValue(it, "accessKey"); it.Kind == yaml.MappingNode && k != nil && k.Value == accessKey {
					accounts.Content = append(accounts.Content[:i], accounts.Content[i+1:]...)
					return nil
				}
			}
		}
		return fmt.Errorf("no account with accessKey %s: %w", accessKey, auth.ErrNotFound)
	})
}

// SetGlobalWhiteAddrs implements auth.AccountAdmin.
func (a *ACL) SetGlobalWhiteAddrs(_ context.Context, addrs []string) error {
	if _, err := compileAddrs(addrs); err != nil {
		return fmt.Errorf("globalWhiteRemoteAddresses: %w", err)
	}
	return a.edit(func(root *yaml.Node) error {
		mapSet(root, "globalWhiteRemoteAddresses", strs(addrs))
		return nil
	})
}

// Snapshot implements auth.AccountAdmin: the rules in force.
func (a *ACL) Snapshot(context.Context) (auth.Accounts, error) {
	r := a.rules.Load()
	out := auth.Accounts{
		File:             a.file,
		GlobalWhiteAddrs: append([]string(nil), r.globalPatterns...),
		Version:          auth.Version{Counter: a.version.Load(), Timestamp: time.UnixMilli(a.verTime.Load())},
	}
	for _, ak := range r.order {
		s := r.accounts[ak].src
		out.Accounts = append(out.Accounts, auth.Account{
			AccessKey: s.AccessKey, SecretKey: s.SecretKey, WhiteRemoteAddress: s.WhiteRemoteAddress, Admin: s.Admin,
			DefaultTopicPerm: s.DefaultTopicPerm, DefaultGroupPerm: s.DefaultGroupPerm,
			TopicPerms: append([]string(nil), s.TopicPerms...), GroupPerms: append([]string(nil), s.GroupPerms...),
		})
	}
	return out, nil
}

// edit applies change to the file's YAML tree, then persists and installs
// the result.
func (a *ACL) edit(change func(root *yaml.Node) error) error {
	a.adminMu.Lock()
	defer a.adminMu.Unlock()
	data, err := os.ReadFile(a.file)
	if err != nil {
		return fmt.Errorf("read the acl file: %w", err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return fmt.Errorf("the acl file does not parse: %w", redactErr(err, secretCandidates(data)))
	}
	if doc.Kind == 0 {
		doc = yaml.Node{Kind: yaml.DocumentNode, Content: []*yaml.Node{{Kind: yaml.MappingNode, Tag: "!!map"}}}
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode {
		return errors.New("the acl file is not a YAML mapping")
	}
	if err := change(doc.Content[0]); err != nil {
		return err
	}
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(&doc); err != nil {
		return fmt.Errorf("encode the acl file: %w", err)
	}
	if err := enc.Close(); err != nil {
		return fmt.Errorf("encode the acl file: %w", err)
	}
	out := buf.Bytes()
	if _, err := parseRules(out); err != nil {
		return fmt.Errorf("the change does not load: %w", err)
	}
	if err := writeAtomic(a.file, out); err != nil {
		return err
	}
	if _, err := a.load(); err != nil {
		return err
	}
	a.log.Info("acl: rules changed over the wire", "file", a.file, "accounts", len(a.rules.Load().accounts))
	a.logWhiteLists(a.rules.Load())
	return nil
}

// writeAtomic replaces path with data: a temporary file in the same
// directory, fsynced, renamed over path, then the directory fsynced. The
// file keeps its permissions.
func writeAtomic(path string, data []byte) (err error) {
	mode := os.FileMode(0o600)
	if fi, err := os.Stat(path); err == nil {
		mode = fi.Mode().Perm()
	}
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("write the acl file: %w", err)
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			os.Remove(tmp)
		}
	}()
	if _, err = f.Write(data); err == nil {
		err = f.Chmod(mode)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", tmp, err)
	}
	if err = os.Rename(tmp, path); err != nil {
		return fmt.Errorf("write the acl file: %w", err)
	}
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	defer d.Close()
	if err = d.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	return nil
}

func str(s string) *yaml.Node { return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: s} }

func strs(ss []string) *yaml.Node {
	n := &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq"}
	for _, s := range ss {
		n.Content = append(n.Content, str(s))
	}
	return n
}

// mapValue returns the value of key in mapping m, or nil.
func mapValue(m *yaml.Node, key string) *yaml.Node {
	if m == nil || m.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	return nil
}

// mapSet sets key in mapping m to v, in place when it is there (keeping
// the key's comments), else at the end.
func mapSet(m *yaml.Node, key string, v *yaml.Node) {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			v.LineComment = m.Content[i+1].LineComment
			m.Content[i+1] = v
			return
		}
	}
	m.Content = append(m.Content, str(key), v)
}
