package kernel

import (
	"log/slog"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx/fxtest"

	"github.com/quivermq/quiver/core/auth"
	"github.com/quivermq/quiver/core/config"
	"github.com/quivermq/quiver/core/remoting"
)

// The guard reads auth.<id> and its old spelling <id> alike; a section
// with problems is refused with them, not opened.
func TestGuardSpellings(t *testing.T) {
	reg, err := NewRegistry("auth plugin", []auth.Provider{codeSignerProvider{}}, auth.Provider.ID)
	require.NoError(t, err)
	for _, give := range []map[string]any{
		{"auth": map[string]any{"fakeacl": map[string]any{"enabled": true, "namesrv_enabled": true, "keyed": true}}},
		{"fakeacl": map[string]any{"enabled": true, "namesrv_enabled": true, "keyed": true}},
		{"auth": map[string]any{"fakeacl": map[string]any{"enabled": true, "keyed": true}}, "fakeacl": map[string]any{"namesrv_enabled": true}},
	} {
		g, err := NewGuard(fxtest.NewLifecycle(t), config.FromMap(give), reg, slog.New(slog.DiscardHandler))
		require.NoError(t, err, "%v", give)
		assert.Len(t, g.Interceptors, 1)
		assert.True(t, g.NamesrvChecked())
		req := remoting.NewRequest(remoting.RegisterBroker, nil, nil)
		g.Sign(req)
		assert.Equal(t, "REGISTER_BROKER", req.ExtFields["signedCode"], "the config reached the plugin")
	}

	_, err = NewGuard(fxtest.NewLifecycle(t), config.FromMap(map[string]any{"auth.fakeacl.enabled": true, "auth.fakeacl.keyd": true}), reg, slog.New(slog.DiscardHandler))
	var pe *PlanError
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, "unknown key auth.fakeacl.keyd; did you mean auth.fakeacl.keyed?", pe.Error())
}
