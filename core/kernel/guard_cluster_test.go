package kernel

import (
	"context"
	"errors"
	"maps"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/auth"
	"github.com/quivermq/quiver/core/remoting"
)

func localRequest(t *testing.T, c *localCredential) *remoting.Command {
	t.Helper()
	req := remoting.NewRequest(remoting.RegisterBroker, map[string]string{"brokerName": "b1", "brokerAddr": "127.0.0.1:10911"}, []byte(`{"topics":1}`))
	c.sign(req)
	require.True(t, c.valid(req))
	return req
}

// The process's own credential passes only unchanged requests of the
// same process.
func TestLocalCredential(t *testing.T) {
	c, err := newLocalCredential()
	require.NoError(t, err)
	other, err := newLocalCredential()
	require.NoError(t, err)

	tests := []struct {
		name   string
		change func(*remoting.Command)
		want   bool
	}{
		{"unchanged", func(*remoting.Command) {}, true},
		{"a field added after signing (the ACL's)", func(r *remoting.Command) { r.ExtFields["AccessKey"] = "ak" }, true},
		{"a covered field changed", func(r *remoting.Command) { r.ExtFields["brokerAddr"] = "127.0.0.1:6666" }, false},
		{"a covered field removed", func(r *remoting.Command) { delete(r.ExtFields, "brokerName") }, false},
		{"the body changed", func(r *remoting.Command) { r.Body = []byte(`{"topics":2}`) }, false},
		{"the code changed", func(r *remoting.Command) { r.Code = remoting.UnregisterBroker }, false},
		{"no credential", func(r *remoting.Command) { delete(r.ExtFields, LocalCredentialKey) }, false},
		{"another process's", func(r *remoting.Command) { other.sign(r) }, false},
		{"no colon", func(r *remoting.Command) { r.ExtFields[LocalCredentialKey] = "abc" }, false},
		{"bad base64", func(r *remoting.Command) {
			v := r.ExtFields[LocalCredentialKey]
			r.ExtFields[LocalCredentialKey] = v[:strings.LastIndexByte(v, ':')+1] + "!!!"
		}, false},
		{"fewer keys claimed", func(r *remoting.Command) {
			v := r.ExtFields[LocalCredentialKey]
			r.ExtFields[LocalCredentialKey] = strings.TrimPrefix(v, "brokerAddr,")
		}, false},
		{"keys unsorted", func(r *remoting.Command) {
			v := r.ExtFields[LocalCredentialKey]
			r.ExtFields[LocalCredentialKey] = strings.Replace(v, "brokerAddr,brokerName", "brokerName,brokerAddr", 1)
		}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := localRequest(t, c)
			tt.change(req)
			assert.Equal(t, tt.want, c.valid(req))
		})
	}
}

type refuseAll struct{ seen []auth.Request }

func (r *refuseAll) Check(_ context.Context, req auth.Request) (auth.Principal, error) {
	r.seen = append(r.seen, req)
	return auth.Principal{}, errors.New("acl: refused for the test")
}

// The Guard's interceptor lets the process's own requests through and
// asks the plugin about every other one, handing it the message lookup.
func TestGuardInterceptor(t *testing.T) {
	c, err := newLocalCredential()
	require.NoError(t, err)
	g := &Guard{local: c}
	look := auth.MessageLookup(func(context.Context, int64) (auth.StoredMessage, error) {
		return auth.StoredMessage{Topic: "T"}, nil
	})
	g.lookup.f.Store(&look)
	plugin := &refuseAll{}
	ic := g.checkerInterceptor(plugin)

	own := localRequest(t, c)
	assert.Nil(t, ic(context.Background(), nil, own))
	assert.Empty(t, plugin.seen, "the plugin is not asked about the process's own requests")

	foreign := remoting.NewRequest(remoting.RegisterBroker, maps.Clone(own.ExtFields), own.Body)
	foreign.ExtFields["brokerAddr"] = "127.0.0.1:6666"
	resp := ic(context.Background(), nil, foreign)
	require.NotNil(t, resp)
	assert.Equal(t, remoting.NoPermission, resp.Code)
	assert.Equal(t, "acl: refused for the test", resp.Remark)
	require.Len(t, plugin.seen, 1)
	require.NotNil(t, plugin.seen[0].Lookup)
	m, err := plugin.seen[0].Lookup(context.Background(), 1)
	require.NoError(t, err)
	assert.Equal(t, "T", m.Topic)
}
