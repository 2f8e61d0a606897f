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
	"github.com/quivermq/quiver/plugins/transport/tcp"
)

func moduleOptions(cfg *config.Config, out **Server) fx.Option {
	return fx.Options(
		kernel.Supply(cfg),
		kernel.Module,
		kernel.AsSection(ConfigSection), // as server.Options adds every stock section
		tcp.Module,
		Module,
		fx.Populate(out),
		fx.NopLogger,
	)
}

func TestModuleGraph(t *testing.T) {
	var s *Server
	require.NoError(t, fx.ValidateApp(moduleOptions(config.FromMap(map[string]any{}), &s)))
}

func TestModuleLifecycle(t *testing.T) {
	cfg := config.FromMap(map[string]any{"namesrv.listen": "127.0.0.1:0", "log.level": "error"})
	var s *Server
	app := fxtest.New(t, moduleOptions(cfg, &s))
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
	var s *Server
	app := fx.New(moduleOptions(config.FromMap(map[string]any{"namesrv.bogus": "1"}), &s))
	require.ErrorContains(t, app.Err(), "bogus")
}
