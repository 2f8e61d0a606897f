package namesrv

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/remoting"
)

func kvReq(ns, key string) map[string]string { return map[string]string{"namespace": ns, "key": key} }

func kvPut(ns, key, value string) map[string]string {
	return map[string]string{"namespace": ns, "key": key, "value": value}
}

// TestKVConfigJavaFrames drives the four KV codes with frames shaped as
// Java's MQClientAPIImpl sends them.
func TestKVConfigJavaFrames(t *testing.T) {
	_, addr := startServer(t)

	resp := javaInvoke(t, addr, remoting.PutKVConfig, kvPut("ns1", "k1", "v1"), nil)
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	resp = javaInvoke(t, addr, remoting.PutKVConfig, kvPut("ns1", "k2", `a<&>"b`), nil)
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	resp = javaInvoke(t, addr, remoting.PutKVConfig, kvPut("ns1", "k1", "v1b"), nil)
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)

	resp = javaInvoke(t, addr, remoting.GetKVConfig, kvReq("ns1", "k1"), nil)
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	assert.Equal(t, "v1b", resp.Ext("value"))

	resp = javaInvoke(t, addr, remoting.GetKVConfig, kvReq("ns1", "nokey"), nil)
	assert.Equal(t, remoting.QueryNotFound, resp.Code)
	assert.Equal(t, "No config item, Namespace: ns1 Key: nokey", resp.Remark)
	resp = javaInvoke(t, addr, remoting.GetKVConfig, kvReq("nons", "k1"), nil)
	assert.Equal(t, remoting.QueryNotFound, resp.Code)

	resp = javaInvoke(t, addr, remoting.GetKVListByNamespace, map[string]string{"namespace": "ns1"}, nil)
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	assert.Equal(t, `{"table":{"k1":"v1b","k2":"a<&>\"b"}}`, string(resp.Body))
	resp = javaInvoke(t, addr, remoting.GetKVListByNamespace, map[string]string{"namespace": "other"}, nil)
	assert.Equal(t, remoting.QueryNotFound, resp.Code)
	assert.Equal(t, "No config item, Namespace: other", resp.Remark)
	assert.Empty(t, resp.Body)

	// An empty value is a value (Java's @CFNotNull allows it).
	require.Equal(t, remoting.Success, javaInvoke(t, addr, remoting.PutKVConfig, kvPut("ns2", "", ""), nil).Code)
	resp = javaInvoke(t, addr, remoting.GetKVConfig, kvReq("ns2", ""), nil)
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	assert.Contains(t, resp.ExtMap(), "value")

	for _, k := range []string{"k1", "k2", "k2"} { // deleting an absent key succeeds too
		resp = javaInvoke(t, addr, remoting.DeleteKVConfig, kvReq("ns1", k), nil)
		require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	}
	assert.Equal(t, remoting.QueryNotFound, javaInvoke(t, addr, remoting.GetKVConfig, kvReq("ns1", "k1"), nil).Code)
	// As Java: the emptied namespace still exists.
	resp = javaInvoke(t, addr, remoting.GetKVListByNamespace, map[string]string{"namespace": "ns1"}, nil)
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	assert.Equal(t, `{"table":{}}`, string(resp.Body))
}

func TestKVConfigMissingFields(t *testing.T) {
	_, addr := startServer(t)
	tests := []struct {
		name string
		code int32
		give map[string]string
		want string
	}{
		{name: "put without value", code: remoting.PutKVConfig, give: kvReq("ns", "k"), want: "the custom field <value> is null"},
		{name: "put without namespace", code: remoting.PutKVConfig, give: map[string]string{"key": "k", "value": "v"}, want: "the custom field <namespace> is null"},
		{name: "get without key", code: remoting.GetKVConfig, give: map[string]string{"namespace": "ns"}, want: "the custom field <key> is null"},
		{name: "delete without key", code: remoting.DeleteKVConfig, give: map[string]string{"namespace": "ns"}, want: "the custom field <key> is null"},
		{name: "list without namespace", code: remoting.GetKVListByNamespace, give: nil, want: "the custom field <namespace> is null"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := javaInvoke(t, addr, tt.code, tt.give, nil)
			assert.Equal(t, remoting.SystemError, resp.Code)
			assert.Equal(t, tt.want, resp.Remark)
		})
	}
	// Nothing was stored and the server still serves.
	assert.Equal(t, remoting.QueryNotFound, javaInvoke(t, addr, remoting.GetKVListByNamespace, map[string]string{"namespace": "ns"}, nil).Code)
}

// TestKVConfigSurvivesRestart writes through one name server, stops it and
// reads through a new one over the same file.
func TestKVConfigSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "namesrv", "kvConfig.json")
	cfg := NewConfig()
	cfg.KVConfigPath = path
	s1, addr := startServerCfg(t, cfg)
	for _, kv := range [][3]string{{"ns1", "k1", "v1"}, {"ns1", "k2", "v2"}, {OrderTopicConfigNamespace, "TopicA", "broker-a:4"}} {
		resp := javaInvoke(t, addr, remoting.PutKVConfig, kvPut(kv[0], kv[1], kv[2]), nil)
		require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	}
	require.Equal(t, remoting.Success, javaInvoke(t, addr, remoting.DeleteKVConfig, kvReq("ns1", "k2"), nil).Code)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	require.NoError(t, s1.Stop(ctx))

	// The file is what Java's KVConfigManager writes, and no temporary
	// file is left.
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, `{"configTable":{"ORDER_TOPIC_CONFIG":{"TopicA":"broker-a:4"},"ns1":{"k1":"v1"}}}`, string(b))
	entries, err := os.ReadDir(filepath.Dir(path))
	require.NoError(t, err)
	require.Len(t, entries, 1)
	st, err := os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), st.Mode().Perm())

	cfg2 := NewConfig()
	cfg2.KVConfigPath = path
	_, addr2 := startServerCfg(t, cfg2)
	resp := javaInvoke(t, addr2, remoting.GetKVConfig, kvReq("ns1", "k1"), nil)
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	assert.Equal(t, "v1", resp.Ext("value"))
	assert.Equal(t, remoting.QueryNotFound, javaInvoke(t, addr2, remoting.GetKVConfig, kvReq("ns1", "k2"), nil).Code)
	resp = javaInvoke(t, addr2, remoting.GetKVListByNamespace, map[string]string{"namespace": OrderTopicConfigNamespace}, nil)
	assert.Equal(t, `{"table":{"TopicA":"broker-a:4"}}`, string(resp.Body))
}

func TestKVStoreLoad(t *testing.T) {
	tests := []struct {
		name    string
		give    string
		want    map[string]string
		wantErr string
	}{
		{name: "java file", give: `{"configTable":{"ns":{"a":"1","b":"2"}}}`, want: map[string]string{"a": "1", "b": "2"}},
		{name: "pretty java file", give: "{\n\t\"configTable\":{\n\t\t\"ns\":{\"a\":\"1\"}\n\t}\n}\n", want: map[string]string{"a": "1"}},
		{name: "empty file", give: "", want: nil},
		{name: "null namespace", give: `{"configTable":{"ns":null}}`, want: map[string]string{}},
		{name: "torn file", give: `{"configTable":{"ns":{"a":"1"`, wantErr: "kv load"},
		{name: "wrong shape", give: `{"configTable":["ns"]}`, wantErr: "kv load"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "kvConfig.json")
			require.NoError(t, os.WriteFile(path, []byte(tt.give), 0o600))
			s := NewKVStore(path)
			err := s.Load()
			if tt.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.wantErr)
				assert.Contains(t, err.Error(), path)
				return
			}
			require.NoError(t, err)
			got, _ := s.List("ns")
			assert.Equal(t, tt.want, got)
		})
	}
}

// TestKVStoreBadFileStopsStart: a name server does not start on a KV file
// it cannot read (as Java's), and says which file.
func TestKVStoreBadFileStopsStart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kvConfig.json")
	require.NoError(t, os.WriteFile(path, []byte("{not json"), 0o600))
	cfg := NewConfig()
	cfg.Listen, cfg.KVConfigPath = "127.0.0.1:0", path
	s, err := New(cfg, tcpSet(), testLogger(t))
	require.NoError(t, err)
	err = s.Start(context.Background())
	require.Error(t, err)
	assert.Contains(t, err.Error(), path)
	assert.Empty(t, s.Addrs(), "nothing bound")
	require.NoError(t, s.Stop(context.Background()))
}

// TestKVStoreIgnoresStaleTemp: a temporary file a crash left behind does
// not count; the next write replaces the file.
func TestKVStoreIgnoresStaleTemp(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "kvConfig.json")
	require.NoError(t, os.WriteFile(path, []byte(`{"configTable":{"ns":{"a":"old"}}}`), 0o600))
	require.NoError(t, os.WriteFile(path+".tmp123", []byte(`{"configTable":{"ns":{"a":"torn`), 0o600))
	s := NewKVStore(path)
	require.NoError(t, s.Load())
	v, ok := s.Get("ns", "a")
	require.True(t, ok)
	assert.Equal(t, "old", v)
	require.NoError(t, s.Put("ns", "b", "new"))

	s2 := NewKVStore(path)
	require.NoError(t, s2.Load())
	got, _ := s2.List("ns")
	assert.Equal(t, map[string]string{"a": "old", "b": "new"}, got)
}

// TestKVPersistFailureRollsBack: a change that cannot reach the disk is
// refused and not kept in memory either.
func TestKVPersistFailureRollsBack(t *testing.T) {
	sub := filepath.Join(t.TempDir(), "sub")
	cfg := NewConfig()
	cfg.KVConfigPath = filepath.Join(sub, "kvConfig.json")
	_, addr := startServerCfg(t, cfg)
	require.NoError(t, os.WriteFile(sub, nil, 0o600)) // the directory cannot be made now

	resp := javaInvoke(t, addr, remoting.PutKVConfig, kvPut("ns", "k", "v"), nil)
	assert.Equal(t, remoting.SystemError, resp.Code)
	assert.Contains(t, resp.Remark, "kv persist")
	assert.Equal(t, remoting.QueryNotFound, javaInvoke(t, addr, remoting.GetKVConfig, kvReq("ns", "k"), nil).Code)
	assert.Equal(t, remoting.QueryNotFound, javaInvoke(t, addr, remoting.GetKVListByNamespace, map[string]string{"namespace": "ns"}, nil).Code)
}

func TestKVStoreMemoryOnly(t *testing.T) {
	s := NewKVStore("")
	require.NoError(t, s.Load())
	require.NoError(t, s.Put("ns", "k", "v"))
	assert.Equal(t, []byte(`{"table":{"k":"v"}}`), s.ListJSON("ns"))
	assert.Nil(t, s.ListJSON("other"))
}
