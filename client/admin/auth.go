package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/quivermq/quiver/client"
	"github.com/quivermq/quiver/core/remoting"
)

// ACL 2.0 administration of one broker (RocketMQ 5.3's mqadmin createUser,
// updateUser, deleteUser, getUser, listUser, createAcl, updateAcl,
// deleteAcl, getAcl, listAcl: the AUTH_* codes, Java's headers and JSON
// bodies). The broker runs with auth.acl2.enabled; the client signs as a
// user allowed Update (changes) or Get (reads) on the cluster, or a Super
// user (client.WithCredentials).

// UserInfo is a user as Java's UserInfo.
type UserInfo struct {
	Username   string `json:"username"`
	Password   string `json:"password,omitempty"`
	UserType   string `json:"userType,omitempty"`   // Super | Normal
	UserStatus string `json:"userStatus,omitempty"` // enable | disable
}

// PolicyEntryInfo is one entry of a policy (Java PolicyEntryInfo).
type PolicyEntryInfo struct {
	Resource  string   `json:"resource"`
	Actions   []string `json:"actions"`
	SourceIPs []string `json:"sourceIps,omitempty"`
	Decision  string   `json:"decision"`
}

// PolicyInfo is a subject's policy of one type (Custom or Default).
type PolicyInfo struct {
	PolicyType string            `json:"policyType,omitempty"`
	Entries    []PolicyEntryInfo `json:"entries"`
}

// AclInfo is a subject's policies (Java AclInfo); Subject is "User:<name>".
type AclInfo struct {
	Subject  string       `json:"subject"`
	Policies []PolicyInfo `json:"policies"`
}

func (a *Admin) authCall(ctx context.Context, addr string, code int32, ext map[string]string, body any, out any) (bool, error) {
	var raw []byte
	if body != nil {
		var err error
		if raw, err = json.Marshal(body); err != nil {
			return false, err
		}
	}
	resp, err := a.invokeOK(ctx, addr, client.NewRequest(code, ext, raw))
	if err != nil {
		return false, err
	}
	if out == nil || len(resp.Body) == 0 {
		return false, nil
	}
	if err := json.Unmarshal(resp.Body, out); err != nil {
		return false, fmt.Errorf("decode %s answer: %w", remoting.RequestCodeName(code), err)
	}
	return true, nil
}

// CreateUser creates a user (AUTH_CREATE_USER).
func (a *Admin) CreateUser(ctx context.Context, addr string, u UserInfo) error {
	if _, err := a.authCall(ctx, addr, remoting.AuthCreateUser, map[string]string{"username": u.Username}, u, nil); err != nil {
		return fmt.Errorf("admin: create user %s on %s: %w", u.Username, addr, err)
	}
	return nil
}

// UpdateUser changes the fields u sets (AUTH_UPDATE_USER).
func (a *Admin) UpdateUser(ctx context.Context, addr string, u UserInfo) error {
	if _, err := a.authCall(ctx, addr, remoting.AuthUpdateUser, map[string]string{"username": u.Username}, u, nil); err != nil {
		return fmt.Errorf("admin: update user %s on %s: %w", u.Username, addr, err)
	}
	return nil
}

// DeleteUser deletes a user and its policies (AUTH_DELETE_USER).
func (a *Admin) DeleteUser(ctx context.Context, addr, username string) error {
	if _, err := a.authCall(ctx, addr, remoting.AuthDeleteUser, map[string]string{"username": username}, nil, nil); err != nil {
		return fmt.Errorf("admin: delete user %s on %s: %w", username, addr, err)
	}
	return nil
}

// GetUser reads a user (AUTH_GET_USER); found is false for an unknown one.
func (a *Admin) GetUser(ctx context.Context, addr, username string) (u UserInfo, found bool, err error) {
	found, err = a.authCall(ctx, addr, remoting.AuthGetUser, map[string]string{"username": username}, nil, &u)
	if err != nil {
		return u, false, fmt.Errorf("admin: get user %s on %s: %w", username, addr, err)
	}
	return u, found, nil
}

// ListUsers lists the users whose name contains filter (AUTH_LIST_USER).
func (a *Admin) ListUsers(ctx context.Context, addr, filter string) ([]UserInfo, error) {
	var out []UserInfo
	if _, err := a.authCall(ctx, addr, remoting.AuthListUser, map[string]string{"filter": filter}, nil, &out); err != nil {
		return nil, fmt.Errorf("admin: list users on %s: %w", addr, err)
	}
	return out, nil
}

// CreateACL adds or replaces entries of a subject's policies
// (AUTH_CREATE_ACL).
func (a *Admin) CreateACL(ctx context.Context, addr string, acl AclInfo) error {
	if _, err := a.authCall(ctx, addr, remoting.AuthCreateACL, map[string]string{"subject": acl.Subject}, acl, nil); err != nil {
		return fmt.Errorf("admin: create acl of %s on %s: %w", acl.Subject, addr, err)
	}
	return nil
}

// UpdateACL is CreateACL's update twin (AUTH_UPDATE_ACL).
func (a *Admin) UpdateACL(ctx context.Context, addr string, acl AclInfo) error {
	if _, err := a.authCall(ctx, addr, remoting.AuthUpdateACL, map[string]string{"subject": acl.Subject}, acl, nil); err != nil {
		return fmt.Errorf("admin: update acl of %s on %s: %w", acl.Subject, addr, err)
	}
	return nil
}

// DeleteACL deletes a subject's entry of resource in the policy of
// policyType ("" is Custom), or all its policies when resource is ""
// (AUTH_DELETE_ACL).
func (a *Admin) DeleteACL(ctx context.Context, addr, subject, policyType, resource string) error {
	ext := map[string]string{"subject": subject}
	if policyType != "" {
		ext["policyType"] = policyType
	}
	if resource != "" {
		ext["resource"] = resource
	}
	if _, err := a.authCall(ctx, addr, remoting.AuthDeleteACL, ext, nil, nil); err != nil {
		return fmt.Errorf("admin: delete acl of %s on %s: %w", subject, addr, err)
	}
	return nil
}

// GetACL reads a subject's policies (AUTH_GET_ACL).
func (a *Admin) GetACL(ctx context.Context, addr, subject string) (acl AclInfo, found bool, err error) {
	found, err = a.authCall(ctx, addr, remoting.AuthGetACL, map[string]string{"subject": subject}, nil, &acl)
	if err != nil {
		return acl, false, fmt.Errorf("admin: get acl of %s on %s: %w", subject, addr, err)
	}
	return acl, found, nil
}

// ListACLs lists policies by subject and resource (substrings)
// (AUTH_LIST_ACL).
func (a *Admin) ListACLs(ctx context.Context, addr, subjectFilter, resourceFilter string) ([]AclInfo, error) {
	var out []AclInfo
	ext := map[string]string{}
	if subjectFilter != "" {
		ext["subjectFilter"] = subjectFilter
	}
	if resourceFilter != "" {
		ext["resourceFilter"] = resourceFilter
	}
	if _, err := a.authCall(ctx, addr, remoting.AuthListACL, ext, nil, &out); err != nil {
		return nil, fmt.Errorf("admin: list acls on %s: %w", addr, err)
	}
	return out, nil
}

// ACL2Off reports whether err is a broker's answer that it does not serve
// ACL 2.0: REQUEST_CODE_NOT_SUPPORTED to an AUTH_* request (the auth.acl2
// plugin is off there).
func ACL2Off(err error) bool {
	var be *client.BrokerError
	return errors.As(err, &be) && be.Code == remoting.RequestCodeNotSupported
}
