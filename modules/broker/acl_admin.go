package broker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/quivermq/quiver/core/auth"
	"github.com/quivermq/quiver/core/remoting"
)

// The ACL admin codes (RocketMQ 4.9's AdminBrokerProcessor
// updateAndCreateAccessConfig, deleteAccessConfig,
// updateGlobalWhiteAddrsConfig, getBrokerAclConfigVersion and
// getBrokerClusterAclConfig). The rules live in the auth plugin; the broker
// finds it as an auth.AccountAdmin among the kernel's authenticators.
//
// Differences from Java, on purpose:
//   - every one of them needs an admin account (Java 4.9 lets any account
//     with a valid signature change the ACL: none of 50-54 is in its
//     ADMIN_CODE); white-listed addresses pass as they pass every check,
//     unless auth.acl.strict_white_list is on;
//   - UPDATE_GLOBAL_WHITE_ADDRS_CONFIG writes only the broker's own ACL
//     file: an aclFileFullPath naming another file is refused (Java checks
//     only that it lies under ROCKETMQ_HOME);
//   - with ACL off the answer is the code's failure code (or SYSTEM_ERROR
//     for the queries) with a remark saying so, where Java throws a
//     NullPointerException.

// Response codes of the ACL admin codes (ResponseCode in Java).
const (
	updateACLConfigFailed        int32 = 209 // UPDATE_AND_CREATE_ACL_CONFIG_FAILED
	deleteACLConfigFailed        int32 = 210 // DELETE_ACL_CONFIG_FAILED
	updateGlobalWhiteAddrsFailed int32 = 211 // UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED
)

// errUnsignedRegistration: the name servers check ACL and the broker has
// no credentials to sign its registration with.
var errUnsignedRegistration = errors.New("broker: the name servers check ACL (auth.acl.namesrv_enabled is true) " +
	"but the broker has no credentials to sign its registration: set auth.acl.access_key and auth.acl.secret_key " +
	"to an account of the ACL file with role: broker")

func (b *Broker) registerACLAdmin() {
	r := b.router
	r.Register(remoting.UpdateAndCreateACLConfig, b.aclAdmin(updateACLConfigFailed, b.handleUpdateACL))
	r.Register(remoting.DeleteACLConfig, b.aclAdmin(deleteACLConfigFailed, b.handleDeleteACL))
	r.Register(remoting.UpdateGlobalWhiteAddrsConfig, b.aclAdmin(updateGlobalWhiteAddrsFailed, b.handleUpdateWhiteAddrs))
	r.Register(remoting.GetBrokerClusterACLInfo, b.aclAdmin(remoting.SystemError, b.handleACLInfo))
	r.Register(remoting.GetBrokerClusterACLConfig, b.aclAdmin(remoting.SystemError, b.handleACLConfig))
}

// AccountAdmin returns the enabled auth plugin that administers accounts,
// or nil (ACL off). The console and tests read the white lists through it.
func (b *Broker) AccountAdmin() auth.AccountAdmin {
	for _, a := range b.deps.Authenticators {
		if x, ok := a.(auth.AccountAdmin); ok {
			return x
		}
	}
	return nil
}

type aclHandler func(ctx context.Context, adm auth.AccountAdmin, req *remoting.Command) (*remoting.Command, error)

// aclAdmin finds the plugin, checks that the caller may administer it and
// answers an error with failCode (NO_PERMISSION for a refused caller).
func (b *Broker) aclAdmin(failCode int32, h aclHandler) remoting.HandlerFunc {
	return func(ctx context.Context, p *remoting.Peer, req *remoting.Command) *remoting.Command {
		adm := b.AccountAdmin()
		if adm == nil {
			return remoting.Errorf(req, failCode, "acl is not enabled on this broker (auth.acl.enabled)")
		}
		var remote string
		if p != nil {
			remote = p.RemoteAddr()
		}
		if err := adm.AuthorizeAdmin(ctx, auth.Request{Code: req.Code, RemoteAddr: remote, ExtFields: req.ExtFields, Body: req.Body}); err != nil {
			return remoting.Errorf(req, remoting.NoPermission, err.Error())
		}
		resp, err := h(ctx, adm, req)
		if err != nil {
			b.log.Warn("acl admin refused", "code", remoting.RequestCodeName(req.Code), "remote", remote, "err", err)
			return remoting.Errorf(req, failCode, err.Error())
		}
		b.log.Info("acl admin", "code", remoting.RequestCodeName(req.Code), "remote", remote)
		return resp
	}
}

// splitList is Java's UtilAll.split(s, ","), with empty items dropped; nil
// when the field is absent.
func splitList(ext map[string]string, key string) []string {
	v, ok := ext[key]
	if !ok {
		return nil
	}
	out := []string{}
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

func (b *Broker) handleUpdateACL(ctx context.Context, adm auth.AccountAdmin, req *remoting.Command) (*remoting.Command, error) {
	ext := req.ExtFields
	ak := ext["accessKey"]
	if ak == "" {
		return nil, errors.New("the accessKey is missing")
	}
	u := auth.AccountUpdate{
		AccessKey: ak, SecretKey: ext["secretKey"],
		DefaultTopicPerm: ext["defaultTopicPerm"], DefaultGroupPerm: ext["defaultGroupPerm"],
		TopicPerms: splitList(ext, "topicPerms"), GroupPerms: splitList(ext, "groupPerms"),
	}
	if w, ok := ext["whiteRemoteAddress"]; ok {
		u.WhiteRemoteAddress = &w
	}
	// Java's header decoding is Boolean.parseBoolean: "true" in any case
	// is true, anything else (absent included) false.
	u.Admin = strings.EqualFold(ext["admin"], "true")
	if err := adm.UpdateAccount(ctx, u); err != nil {
		//lint:ignore ST1005 the remark is Java's text, which tools match
		return nil, fmt.Errorf("The accesskey[%s] corresponding to accessConfig has been updated failed: %w", ak, err)
	}
	return remoting.NewResponse(req, remoting.Success, ""), nil
}

func (b *Broker) handleDeleteACL(ctx context.Context, adm auth.AccountAdmin, req *remoting.Command) (*remoting.Command, error) {
	ak := req.ExtFields["accessKey"]
	if ak == "" {
		return nil, errors.New("the accessKey is missing")
	}
	if err := adm.DeleteAccount(ctx, ak); err != nil {
		//lint:ignore ST1005 the remark is Java's text, which tools match
		return nil, fmt.Errorf("The accesskey[%s] corresponding to accessConfig has been deleted failed: %w", ak, err)
	}
	return remoting.NewResponse(req, remoting.Success, ""), nil
}

func (b *Broker) handleUpdateWhiteAddrs(ctx context.Context, adm auth.AccountAdmin, req *remoting.Command) (*remoting.Command, error) {
	raw, ok := req.ExtFields["globalWhiteAddrs"]
	if !ok {
		return nil, errors.New("the globalWhiteAddrs field is missing")
	}
	if path := req.ExtFields["aclFileFullPath"]; path != "" {
		snap, err := adm.Snapshot(ctx)
		if err != nil {
			return nil, err
		}
		if !sameFile(path, snap.File) {
			//lint:ignore ST1005 the remark is Java's text, which tools match
			return nil, fmt.Errorf("The globalWhiteAddresses[%s] has been updated failed: aclFileFullPath %s is not this broker's ACL file", raw, path)
		}
	}
	if err := adm.SetGlobalWhiteAddrs(ctx, splitList(req.ExtFields, "globalWhiteAddrs")); err != nil {
		//lint:ignore ST1005 the remark is Java's text, which tools match
		return nil, fmt.Errorf("The globalWhiteAddresses[%s] has been updated failed: %w", raw, err)
	}
	return remoting.NewResponse(req, remoting.Success, ""), nil
}

// dataVersion is Java's DataVersion as fastjson writes it.
type dataVersion struct {
	Counter   int64 `json:"counter"`
	Timestamp int64 `json:"timestamp"`
}

func (b *Broker) handleACLInfo(ctx context.Context, adm auth.AccountAdmin, req *remoting.Command) (*remoting.Command, error) {
	snap, err := adm.Snapshot(ctx)
	if err != nil {
		return nil, err
	}
	v := dataVersion{Counter: snap.Version.Counter, Timestamp: snap.Version.Timestamp.UnixMilli()}
	version, _ := json.Marshal(v)
	all, _ := json.Marshal(map[string]dataVersion{snap.File: v})
	resp := remoting.NewResponse(req, remoting.Success, "")
	resp.ExtFields = map[string]string{
		"version":           string(version),
		"allAclFileVersion": string(all),
		"brokerName":        b.cfg.Name,
		"brokerAddr":        b.cfg.AdvertiseAddr(),
		"clusterName":       b.cfg.Cluster,
	}
	return resp, nil
}

// plainAccessConfig is Java's PlainAccessConfig as fastjson writes it (keys
// in alphabetical order, null fields left out).
type plainAccessConfig struct {
	AccessKey          string   `json:"accessKey"`
	Admin              bool     `json:"admin"`
	DefaultGroupPerm   string   `json:"defaultGroupPerm,omitempty"`
	DefaultTopicPerm   string   `json:"defaultTopicPerm,omitempty"`
	GroupPerms         []string `json:"groupPerms,omitempty"`
	SecretKey          string   `json:"secretKey,omitempty"`
	TopicPerms         []string `json:"topicPerms,omitempty"`
	WhiteRemoteAddress string   `json:"whiteRemoteAddress,omitempty"`
}

// aclConfigBody is GetBrokerClusterAclConfigResponseBody.
type aclConfigBody struct {
	GlobalWhiteAddrs   []string            `json:"globalWhiteAddrs"`
	PlainAccessConfigs []plainAccessConfig `json:"plainAccessConfigs"`
}

func (b *Broker) handleACLConfig(ctx context.Context, adm auth.AccountAdmin, req *remoting.Command) (*remoting.Command, error) {
	snap, err := adm.Snapshot(ctx)
	if err != nil {
		return nil, err
	}
	body := aclConfigBody{GlobalWhiteAddrs: snap.GlobalWhiteAddrs, PlainAccessConfigs: []plainAccessConfig{}}
	if body.GlobalWhiteAddrs == nil {
		body.GlobalWhiteAddrs = []string{}
	}
	for _, a := range snap.Accounts {
		body.PlainAccessConfigs = append(body.PlainAccessConfigs, plainAccessConfig{
			AccessKey: a.AccessKey, Admin: a.Admin, DefaultGroupPerm: a.DefaultGroupPerm, DefaultTopicPerm: a.DefaultTopicPerm,
			GroupPerms: a.GroupPerms, SecretKey: a.SecretKey, TopicPerms: a.TopicPerms, WhiteRemoteAddress: a.WhiteRemoteAddress,
		})
	}
	raw, err := json.Marshal(&body)
	if err != nil {
		return nil, fmt.Errorf("encode acl config: %w", err)
	}
	resp := remoting.NewResponse(req, remoting.Success, "")
	resp.Body = raw
	return resp, nil
}

// sameFile reports whether two paths name one file (cleaned absolute
// paths, then os.SameFile when both exist).
func sameFile(a, b string) bool {
	aa, err1 := filepath.Abs(a)
	bb, err2 := filepath.Abs(b)
	if err1 != nil || err2 != nil {
		return false
	}
	if filepath.Clean(aa) == filepath.Clean(bb) {
		return true
	}
	fa, err1 := os.Stat(aa)
	fb, err2 := os.Stat(bb)
	return err1 == nil && err2 == nil && os.SameFile(fa, fb)
}
