package pop

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx"
	"go.uber.org/goleak"
)

// TestModuleOpensAtStart: the module opens pop's files when the app
// starts and closes them when it stops; an app whose start fails before
// pop's (a broker that cannot bind, say) leaves no journal goroutine or
// file behind, and a started one serves and stops cleanly.
func TestModuleOpensAtStart(t *testing.T) {
	n := newNode(t, engines[0])
	before := goleak.IgnoreCurrent()
	dir := filepath.Join(n.dir, "pop")
	require.NoError(t, n.s.Close()) // the node's own service: the module opens the same directory

	app := fx.New(fx.NopLogger, fx.Supply(n.b),
		fx.Invoke(func(lc fx.Lifecycle) {
			lc.Append(fx.Hook{OnStart: func(context.Context) error { return errors.New("the broker did not start") }})
		}),
		Module, fx.Invoke(func(*Service) {}))
	require.NoError(t, app.Err())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.Error(t, app.Start(ctx))
	goleak.VerifyNone(t, before)

	var s *Service
	app = fx.New(fx.NopLogger, fx.Supply(n.b), Module, fx.Populate(&s))
	require.NoError(t, app.Start(ctx))
	_, err := os.Stat(dir)
	require.NoError(t, err)
	assert.NotNil(t, s.j, "opened at start")
	require.NoError(t, app.Stop(ctx))
	goleak.VerifyNone(t, before)
}
