package remoting_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/auth"
	"github.com/quivermq/quiver/core/remoting"
)

// TestCodeTableCoversConstants: every request-code constant of codes.go
// has exactly one row, and each row is well formed, so a code added as a
// constant without a row fails here.
func TestCodeTableCoversConstants(t *testing.T) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "codes.go", nil, parser.ParseComments|parser.SkipObjectResolution)
	require.NoError(t, err)
	consts := 0
	for _, d := range f.Decls {
		gd, ok := d.(*ast.GenDecl)
		if !ok || gd.Tok != token.CONST || gd.Doc == nil || !strings.HasPrefix(gd.Doc.Text(), "Request codes") {
			continue
		}
		for _, s := range gd.Specs {
			vs := s.(*ast.ValueSpec)
			lit, ok := vs.Values[0].(*ast.BasicLit)
			require.True(t, ok, "%s: a request code is a literal", vs.Names[0])
			n, err := strconv.ParseInt(lit.Value, 10, 32)
			require.NoError(t, err)
			_, ok = remoting.Code(int32(n))
			assert.True(t, ok, "request code %s (%d) has no row in codeRows", vs.Names[0], n)
			consts++
		}
	}
	require.Greater(t, consts, 100, "the request-code constants are read from codes.go")

	names := map[string]bool{}
	rows := remoting.Codes()
	for i, c := range rows {
		if i > 0 {
			assert.Less(t, rows[i-1].Code, c.Code, "Codes is in code order")
		}
		assert.False(t, names[c.Name], "%s names two codes", c.Name)
		names[c.Name] = true
		assert.Equal(t, c.Name, remoting.RequestCodeName(c.Code))
		assert.NotZero(t, c.From, c.Name)
		assert.Contains(t, []remoting.Role{remoting.RoleNamesrv, remoting.RoleBroker, remoting.RoleClient, remoting.RoleBrokerClient, remoting.RoleNone}, c.ServedBy, c.Name)
		switch c.Auth.Kind {
		case remoting.AuthResources:
			assert.NotEmpty(t, c.Auth.Needs, c.Name)
			for _, s := range c.Auth.Needs {
				assert.Contains(t, []auth.Action{auth.Pub, auth.Sub, auth.Any}, s.Perm, c.Name)
				assert.NotEmpty(t, s.Path, c.Name)
			}
		case remoting.AuthPublic, remoting.AuthRefused:
			assert.NotEmpty(t, c.Auth.Reason, "%s: a %s row says why", c.Name, c.Auth.Kind)
		case 0:
			t.Errorf("%s has no authorization rule", c.Name)
		}
		if c.Auth.Kind != remoting.AuthResources {
			assert.Empty(t, c.Auth.Needs, c.Name)
		}
	}
	assert.Equal(t, "UNKNOWN_4242", remoting.RequestCodeName(4242))
}

func TestCodeDirection(t *testing.T) {
	tests := []struct {
		give int32
		want string
	}{
		{remoting.SendMessage, "client → broker"},
		{remoting.RegisterBroker, "broker → name server"},
		{remoting.CheckTransactionState, "broker → client"},
		{remoting.ConsumeMessageDirectly, "tool → broker → client"},
		{remoting.GetRouteInfoByTopic, "client → name server"},
	}
	for _, tt := range tests {
		c, ok := remoting.Code(tt.give)
		require.True(t, ok)
		assert.Equal(t, tt.want, c.Direction(), c.Name)
	}
}
