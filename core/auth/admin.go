package auth

import (
	"context"
	"errors"
	"time"
)

// ErrNotFound is returned by AccountAdmin for an account that does not
// exist.
var ErrNotFound = errors.New("auth: not found")

// RequestSigner is an optional interface of a Signer that binds its
// signature to the request code (and, for RocketMQ's ACL, a timestamp and
// a nonce), so that a captured request can be neither re-targeted at
// another code nor replayed. SignCode reports false when the plugin has no
// credentials.
type RequestSigner interface {
	SignCode(code int32, ext map[string]string, body []byte) bool
}

// Account is one account as RocketMQ's PlainAccessConfig carries it.
type Account struct {
	AccessKey          string
	SecretKey          string
	WhiteRemoteAddress string
	Admin              bool
	DefaultTopicPerm   string
	DefaultGroupPerm   string
	TopicPerms         []string
	GroupPerms         []string
}

// AccountUpdate creates or updates one account, merged as Java's
// PlainPermissionManager.updateAccessConfig does: AccessKey and SecretKey
// are required; Admin is always written; the other fields are written when
// set (a nil pointer or slice keeps what the account has; an empty
// default permission keeps it too).
type AccountUpdate struct {
	AccessKey          string
	SecretKey          string
	WhiteRemoteAddress *string
	Admin              bool
	DefaultTopicPerm   string
	DefaultGroupPerm   string
	TopicPerms         []string
	GroupPerms         []string
}

// Version is the data version of the account rules (RocketMQ's
// DataVersion): the counter grows with every change, Timestamp is when the
// current rules were installed.
type Version struct {
	Counter   int64
	Timestamp time.Time
}

// Accounts is a snapshot of the rules an AccountAdmin serves.
type Accounts struct {
	// File is where the rules live (the ACL file).
	File             string
	GlobalWhiteAddrs []string
	Accounts         []Account
	Version          Version
}

// AccountAdmin is an optional interface of an auth plugin whose accounts
// can be administered over the wire (RocketMQ's UPDATE_AND_CREATE_ACL_CONFIG,
// DELETE_ACL_CONFIG, UPDATE_GLOBAL_WHITE_ADDRS_CONFIG and the two ACL
// queries). Modules find it among the kernel's authenticators by type
// assertion. Changes are persisted before they are applied; each method's
// error is fit for the client and never holds a secret.
type AccountAdmin interface {
	// AuthorizeAdmin says whether the sender of req may administer
	// accounts (an error wrapping ErrUnauthenticated or ErrDenied if
	// not). It does not consume req's nonce: call it after the
	// interceptor has accepted req.
	AuthorizeAdmin(ctx context.Context, req Request) error
	UpdateAccount(ctx context.Context, u AccountUpdate) error
	// DeleteAccount removes an account; ErrNotFound if there is none.
	DeleteAccount(ctx context.Context, accessKey string) error
	// SetGlobalWhiteAddrs replaces globalWhiteRemoteAddresses.
	SetGlobalWhiteAddrs(ctx context.Context, addrs []string) error
	Snapshot(ctx context.Context) (Accounts, error)
}
