package acl_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/auth"
	"github.com/quivermq/quiver/plugins/auth/acl"
	"github.com/quivermq/quiver/plugins/auth/acl/acl49test"
)

// TestRocketMQ49Decisions: RocketMQ 4.9.8's sample plain_acl.yml, copied
// unchanged, gives 4.9.8's decision on every case of the table (issue 43).
func TestRocketMQ49Decisions(t *testing.T) {
	require.GreaterOrEqual(t, len(acl49test.Cases), 40)
	path := filepath.Join(t.TempDir(), "plain_acl.yml")
	require.NoError(t, os.WriteFile(path, []byte(acl49test.Sample), 0o600))
	cfg := acl.NewConfig()
	cfg.File, cfg.ReloadInterval = path, 0
	a, err := acl.New(cfg, auth.Deps{})
	require.NoError(t, err)
	defer a.Close()
	seen := map[string]bool{}
	for _, c := range acl49test.Cases {
		require.False(t, seen[c.Name], "case %q twice", c.Name)
		seen[c.Name] = true
		t.Run(c.Name, func(t *testing.T) {
			_, err := a.Check(context.Background(), acl49test.Request(c))
			if c.Allow {
				require.NoError(t, err, "4.9 allows: %s", c.Why)
			} else {
				require.Error(t, err, "4.9 refuses: %s", c.Why)
			}
		})
	}
}
