package acl

import (
	"github.com/quivermq/quiver/core/auth"
)

// RocketMQ's white lists: a request from an address in
// globalWhiteRemoteAddresses skips every check, and one from an account's
// whiteRemoteAddress skips that account's signature and permission
// checks. Quiver keeps these semantics (4.9 clients and deployments rely
// on them) but says at start-up and on each reload which addresses bypass
// signatures, lists them (WhiteLists, GET_BROKER_CLUSTER_ACL_CONFIG), and
// with auth.acl.strict_white_list holds admin requests from those addresses to
// a signature and the account's permissions.

// WhiteList is who bypasses signature checks.
type WhiteList struct {
	// Global are the globalWhiteRemoteAddresses patterns.
	Global []string
	// Accounts maps access keys to their whiteRemoteAddress pattern
	// (accounts without one are left out).
	Accounts map[string]string
	// Strict is auth.acl.strict_white_list.
	Strict bool
}

// WhiteLists returns the white lists of the current rules.
func (a *ACL) WhiteLists() WhiteList { return a.whiteListsOf(a.rules.Load()) }

func (a *ACL) whiteListsOf(r *rules) WhiteList {
	w := WhiteList{Global: append([]string(nil), r.globalPatterns...), Accounts: map[string]string{}, Strict: a.strictWhite}
	for ak, acct := range r.accounts {
		if acct.whitePattern != "" {
			w.Accounts[ak] = acct.whitePattern
		}
	}
	return w
}

func (a *ACL) logWhiteLists(r *rules) {
	w := a.whiteListsOf(r)
	if len(w.Global) == 0 && len(w.Accounts) == 0 {
		return
	}
	bypass := "every check"
	if w.Strict {
		bypass = "every check but admin requests' (auth.acl.strict_white_list)"
	}
	a.log.Warn("acl: white-listed addresses skip signature checks", "file", a.file,
		"globalWhiteRemoteAddresses", w.Global, "accounts_whiteRemoteAddress", w.Accounts, "skipped", bypass)
}

// whiteListed reports whether req comes from a white-listed address (the
// global list or the white list of the account it names).
func (a *ACL) whiteListed(r *rules, req auth.Request) bool {
	ip, ok := remoteIP(req.RemoteAddr)
	if !ok {
		return false
	}
	if r.global(ip) {
		return true
	}
	acct, ok := r.accounts[req.ExtFields[KeyAccessKey]]
	return ok && acct.white(ip)
}

// isAdminRequest: codes for admins or cluster members, which
// auth.acl.strict_white_list does not let a white list wave through.
func isAdminRequest(req auth.Request) bool {
	rule, ok := RuleFor(req.Code)
	if !ok {
		return true
	}
	switch rule.Kind {
	case AdminOnly, AdminOrCluster, ClusterOnly:
		return true
	}
	return false
}
