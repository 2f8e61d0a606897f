package kernel

import (
	"log/slog"
	"maps"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx/fxtest"

	"github.com/quivermq/quiver/core/auth"
	"github.com/quivermq/quiver/core/config"
	"github.com/quivermq/quiver/core/remoting"
)

// guardFor plans give for a process with the auth plugins provs (and no
// transport) and opens the plan's guard.
func guardFor(t *testing.T, give map[string]any, provs ...auth.Provider) (*Guard, error) {
	t.Helper()
	give = maps.Clone(give)
	give["transports"] = []string{}
	p, err := NewPlan(config.FromMap(give), Spec{Plugins: Plugins{Auth: provs}})
	if err != nil {
		return nil, err
	}
	return NewGuard(fxtest.NewLifecycle(t), p, slog.New(slog.DiscardHandler))
}

// The guard reads auth.<id> and its old spelling <id> alike; a section
// with problems is refused with them, not opened.
func TestGuardSpellings(t *testing.T) {
	for _, give := range []map[string]any{
		{"auth": map[string]any{"fakeacl": map[string]any{"enabled": true, "namesrv_enabled": true, "keyed": true}}},
		{"fakeacl": map[string]any{"enabled": true, "namesrv_enabled": true, "keyed": true}},
		{"auth": map[string]any{"fakeacl": map[string]any{"enabled": true, "keyed": true}}, "fakeacl": map[string]any{"namesrv_enabled": true}},
	} {
		g, err := guardFor(t, give, codeSignerProvider{})
		require.NoError(t, err, "%v", give)
		assert.Len(t, g.Interceptors, 1)
		assert.True(t, g.NamesrvChecked())
		req := remoting.NewRequest(remoting.RegisterBroker, nil, nil)
		g.Sign(req)
		assert.Equal(t, "REGISTER_BROKER", req.ExtFields["signedCode"], "the config reached the plugin")
	}

	_, err := guardFor(t, map[string]any{"auth.fakeacl.enabled": true, "auth.fakeacl.keyd": true}, codeSignerProvider{})
	var pe *PlanError
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, "unknown key auth.fakeacl.keyd; did you mean auth.fakeacl.keyed?", pe.Error())
}
