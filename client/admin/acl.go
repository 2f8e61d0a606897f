package admin

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/quivermq/quiver/client"
	"github.com/quivermq/quiver/core/remoting"
)

// ACL administration of one broker (RocketMQ's mqadmin updateAclConfig,
// deleteAccessConfig, updateGlobalWhiteAddr, clusterAclConfigVersion and
// getAclConfig). The broker must run with acl.enabled, and the client
// must sign as an admin account (client.WithCredentials).

// AccessConfig is one account, as Java's PlainAccessConfig.
type AccessConfig struct {
	AccessKey          string   `json:"accessKey"`
	SecretKey          string   `json:"secretKey,omitempty"`
	WhiteRemoteAddress string   `json:"whiteRemoteAddress,omitempty"`
	Admin              bool     `json:"admin"`
	DefaultTopicPerm   string   `json:"defaultTopicPerm,omitempty"`
	DefaultGroupPerm   string   `json:"defaultGroupPerm,omitempty"`
	TopicPerms         []string `json:"topicPerms,omitempty"`
	GroupPerms         []string `json:"groupPerms,omitempty"`
}

// ACLConfig is what a broker's ACL file holds (GET_BROKER_CLUSTER_ACL_CONFIG):
// the addresses that skip signature checks and the accounts.
type ACLConfig struct {
	GlobalWhiteAddrs   []string       `json:"globalWhiteAddrs"`
	PlainAccessConfigs []AccessConfig `json:"plainAccessConfigs"`
}

// ACLVersion is a broker's answer to GET_BROKER_CLUSTER_ACL_INFO.
type ACLVersion struct {
	BrokerName, BrokerAddr, ClusterName string
	Counter, Timestamp                  int64
}

// UpdateAccessConfig creates or updates an account on the broker at addr
// (UPDATE_AND_CREATE_ACL_CONFIG). As in Java, fields left empty keep the
// account's current values, except Admin, which is always written.
func (a *Admin) UpdateAccessConfig(ctx context.Context, addr string, ac AccessConfig) error {
	ext := map[string]string{"accessKey": ac.AccessKey, "secretKey": ac.SecretKey, "admin": strconv.FormatBool(ac.Admin)}
	for k, v := range map[string]string{"whiteRemoteAddress": ac.WhiteRemoteAddress, "defaultTopicPerm": ac.DefaultTopicPerm,
		"defaultGroupPerm": ac.DefaultGroupPerm, "topicPerms": strings.Join(ac.TopicPerms, ","), "groupPerms": strings.Join(ac.GroupPerms, ",")} {
		if v != "" {
			ext[k] = v
		}
	}
	if _, err := a.invokeOK(ctx, addr, client.NewRequest(remoting.UpdateAndCreateACLConfig, ext, nil)); err != nil {
		return fmt.Errorf("admin: update acl account %s on %s: %w", ac.AccessKey, addr, err)
	}
	return nil
}

// DeleteAccessConfig removes an account (DELETE_ACL_CONFIG).
func (a *Admin) DeleteAccessConfig(ctx context.Context, addr, accessKey string) error {
	if _, err := a.invokeOK(ctx, addr, client.NewRequest(remoting.DeleteACLConfig, map[string]string{"accessKey": accessKey}, nil)); err != nil {
		return fmt.Errorf("admin: delete acl account %s on %s: %w", accessKey, addr, err)
	}
	return nil
}

// UpdateGlobalWhiteAddrs replaces globalWhiteRemoteAddresses
// (UPDATE_GLOBAL_WHITE_ADDRS_CONFIG) in the broker's ACL file.
func (a *Admin) UpdateGlobalWhiteAddrs(ctx context.Context, addr string, addrs []string) error {
	ext := map[string]string{"globalWhiteAddrs": strings.Join(addrs, ",")}
	if _, err := a.invokeOK(ctx, addr, client.NewRequest(remoting.UpdateGlobalWhiteAddrsConfig, ext, nil)); err != nil {
		return fmt.Errorf("admin: update global white list on %s: %w", addr, err)
	}
	return nil
}

// ACLConfig reads a broker's ACL rules (GET_BROKER_CLUSTER_ACL_CONFIG),
// secrets included: for admins only. GlobalWhiteAddrs and each account's
// WhiteRemoteAddress are the addresses that bypass signature checks.
func (a *Admin) ACLConfig(ctx context.Context, addr string) (*ACLConfig, error) {
	resp, err := a.invokeOK(ctx, addr, client.NewRequest(remoting.GetBrokerClusterACLConfig, nil, nil))
	if err != nil {
		return nil, fmt.Errorf("admin: acl config of %s: %w", addr, err)
	}
	var out ACLConfig
	if err := json.Unmarshal(resp.Body, &out); err != nil {
		return nil, fmt.Errorf("admin: decode acl config of %s: %w", addr, err)
	}
	return &out, nil
}

// ACLVersion reads a broker's ACL data version (GET_BROKER_CLUSTER_ACL_INFO).
func (a *Admin) ACLVersion(ctx context.Context, addr string) (*ACLVersion, error) {
	resp, err := a.invokeOK(ctx, addr, client.NewRequest(remoting.GetBrokerClusterACLInfo, nil, nil))
	if err != nil {
		return nil, fmt.Errorf("admin: acl version of %s: %w", addr, err)
	}
	out := &ACLVersion{BrokerName: resp.ExtFields["brokerName"], BrokerAddr: resp.ExtFields["brokerAddr"], ClusterName: resp.ExtFields["clusterName"]}
	var v struct{ Counter, Timestamp int64 }
	if err := json.Unmarshal([]byte(resp.ExtFields["version"]), &v); err != nil {
		return nil, fmt.Errorf("admin: decode acl version of %s: %w", addr, err)
	}
	out.Counter, out.Timestamp = v.Counter, v.Timestamp
	return out, nil
}

// Authenticated reports whether the broker at addr authenticates the
// client's signature (client.WithCredentials): it asks for the consumers
// of probeGroup (GET_CONSUMER_LIST_BY_GROUP, which any account may ask)
// and reads a NO_PERMISSION answer. A refusal for a missing permission
// (ACL 1.0's "no permission: …", ACL 2.0's "User:x has no permission to
// access …") still authenticated the account; a broker without
// ACL, or one white-listing the client's address, authenticates every
// signature.
func (a *Admin) Authenticated(ctx context.Context, addr, probeGroup string) (bool, error) {
	resp, err := a.c.Invoke(ctx, addr, client.NewRequest(remoting.GetConsumerListByGroup, map[string]string{"consumerGroup": probeGroup}, nil))
	if err != nil {
		return false, fmt.Errorf("admin: authentication probe on %s: %w", addr, err)
	}
	return resp.Code != remoting.NoPermission || strings.Contains(resp.Remark, "no permission:") ||
		strings.Contains(resp.Remark, " has no permission to access "), nil
}
