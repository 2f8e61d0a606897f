package acl

import (
	"context"
	"crypto/hmac"
	"errors"
	"fmt"
	"strings"

	"github.com/quivermq/quiver/core/auth"
	"github.com/quivermq/quiver/core/remoting"
)

// RoleBroker is the account role of cluster members: `role: broker` in
// the ACL file. Such an account may register brokers with name servers,
// replicate (HA_PULL), send controller heartbeats and read what a slave
// copies from its master (ClusterOnly and AdminOrCluster rows). No other
// account may, admin included. Brokers sign with it through
// auth.acl.access_key and auth.acl.secret_key.
const RoleBroker = "broker"

// parseRole parses an account's role: "" (an ordinary account) or broker.
func parseRole(s string) (cluster bool, err error) {
	switch strings.TrimSpace(s) {
	case "":
		return false, nil
	case RoleBroker:
		return true, nil
	}
	return false, fmt.Errorf("role %q is not %q (a cluster member) nor empty (an ordinary account)", s, RoleBroker)
}

// CodeName names a request code.
func CodeName(code int32) string { return remoting.RequestCodeName(code) }

// checkRule decides whether p may send req, by req's row of the
// permission table. p comes from Authenticate on the same rules.
//
// A globally white-listed address passes everything (it trusts the
// network path). An account trusted by its whiteRemoteAddress passes
// like an admin, as in Java, except for ClusterOnly rows, which need its
// role too.
func (a *ACL) checkRule(ctx context.Context, r *rules, p auth.Principal, req auth.Request) error {
	if p.Trusted && p.AccessKey == "" {
		return nil
	}
	rule, needs, err := Required(ctx, req)
	if err != nil {
		return err
	}
	acct, ok := r.accounts[p.AccessKey]
	if !ok {
		return denied("no acl config for accessKey %s", p.AccessKey)
	}
	name := func() string { return fmt.Sprintf("request code %d (%s)", req.Code, rule.Name()) }
	switch rule.Kind {
	case Public, Listed:
		return nil
	case ClusterOnly:
		if acct.cluster {
			return nil
		}
		return denied("no permission: %s is for cluster members (an account with role: %s), which accessKey %s is not", name(), RoleBroker, p.AccessKey)
	case AdminOrCluster:
		if acct.cluster || acct.admin || p.Trusted {
			return nil
		}
		return denied("no permission: %s needs an admin account or a cluster member, which accessKey %s is not", name(), p.AccessKey)
	case AdminOnly:
		if acct.admin || p.Trusted {
			return nil
		}
		return denied("no permission: admin required for %s for accessKey %s", name(), p.AccessKey)
	case Resources:
		if p.Trusted {
			return nil
		}
		for _, n := range needs {
			if err := a.authorize(r, p, n, req.Code); err != nil {
				return err
			}
		}
		return nil
	}
	return denied("%s is served by clients, not by this server", name())
}

var _ auth.ClusterSigner = (*ACL)(nil)

// ClusterCredential implements auth.ClusterSigner: auth.acl.access_key and
// auth.acl.secret_key must be set and, when this process's ACL file lists the
// account, name an account with role: broker and its secret.
func (a *ACL) ClusterCredential() error {
	if a.ak == "" {
		return errors.New("auth.acl.access_key and auth.acl.secret_key are not set")
	}
	acct, ok := a.rules.Load().accounts[a.ak]
	switch {
	case !ok:
		return nil
	case !acct.cluster:
		return fmt.Errorf("auth.acl.access_key %s is an account without role: %s in %s", a.ak, RoleBroker, a.file)
	case !hmac.Equal(acct.secretKey, []byte(a.sk)):
		return fmt.Errorf("auth.acl.secret_key is not the secretKey of %s in %s", a.ak, a.file)
	}
	return nil
}
