package namesrv

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/fx"
	"go.uber.org/fx/fxtest"

	"github.com/quivermq/quiver/core/config"
	"github.com/quivermq/quiver/core/kernel"
	"github.com/quivermq/quiver/core/remoting"
	"github.com/quivermq/quiver/core/transport"
	"github.com/quivermq/quiver/plugins/transport/tcp"
)

func moduleOptions(t *testing.T, cfg *config.Config, out **Server) fx.Option {
	t.Helper()
	plan, err := kernel.NewPlan(cfg, kernel.Spec{Plugins: kernel.Plugins{Transport: []transport.Provider{tcp.NewProvider()}},
		Components: []kernel.Component{{Section: &ConfigSection, Module: Module}}})
	require.NoError(t, err)
	return fx.Options(plan.Options(), fx.Populate(out), fx.NopLogger)
}

func TestModuleGraph(t *testing.T) {
	var s *Server
	require.NoError(t, fx.ValidateApp(moduleOptions(t, config.FromMap(map[string]any{}), &s)))
}

func TestModuleLifecycle(t *testing.T) {
	cfg := config.FromMap(map[string]any{"namesrv.listen": "127.0.0.1:0", "log.level": "error"})
	var s *Server
	app := fxtest.New(t, moduleOptions(t, cfg, &s))
	app.RequireStart()
	addrs := s.Addrs()
	require.Len(t, addrs, 1)

	c := newClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := c.Invoke(ctx, addrs[0], routeReq("TopicA"))
	require.NoError(t, err)
	require.Equal(t, remoting.TopicNotExist, resp.Code)
	require.NoError(t, c.Close())
	app.RequireStop()
}

func TestModuleBadConfig(t *testing.T) {
	_, err := kernel.NewPlan(config.FromMap(map[string]any{"namesrv.bogus": "1"}), kernel.Spec{
		Plugins: kernel.Plugins{Transport: []transport.Provider{tcp.NewProvider()}}, Sections: []kernel.Section{ConfigSection}})
	require.ErrorContains(t, err, "unknown key namesrv.bogus")
}
