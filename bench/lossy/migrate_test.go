//go:build linux

package lossy

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/bench/lossy/linkemu"
	"github.com/quivermq/quiver/internal/testserver"
)

// TestLabMigrate (root only; skipped cleanly elsewhere) runs the lab's
// migrate workload once over the cellular profile: a lab (linkemu) is
// started in this process, and this test binary runs TestLabWorkloads in
// namespace A against `mq dev` in namespace B, QUIC only, for 4 s of
// sync sends with an address change and Client.Migrate halfway. It checks
// the LAB line: every acknowledged message stored once, no connection
// redialled, at least one migrated.
func TestLabMigrate(t *testing.T) {
	if err := linkemu.Available(); err != nil {
		t.Skipf("lossy-link lab unavailable: %v", err)
	}
	if os.Getenv("QUIVER_LAB_NS_B") != "" {
		t.Skip("inside a lab run")
	}
	mq := testserver.Binary(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	p, err := linkemu.Lookup("cellular")
	require.NoError(t, err)
	lab, err := linkemu.Start(ctx, fmt.Sprintf("qm%d", os.Getpid()%100000), p, 7, nil)
	require.NoError(t, err)
	defer lab.Close()

	cmd := linkemu.Command(ctx, lab.NsA, os.Args[0], "-test.run", "^TestLabWorkloads$", "-test.v", "-test.timeout", "90s")
	cmd.Env = append(os.Environ(), "QUIVER_MQ_BINARY="+mq, "QUIVER_LAB_SECONDS=4", "QUIVER_LAB_NS_B="+lab.NsB,
		"QUIVER_LAB_PROFILE=cellular", "QUIVER_LAB_ORDER=quic", "QUIVER_LAB_WORKLOADS=migrate",
		"QUIVER_LAB_ADDR_A="+lab.AddrA, "QUIVER_LAB_ADDR_A2="+lab.AddrA2, "QUIVER_LAB_ADDR_B="+lab.AddrB)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	var line string
	for _, l := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(l, "LAB ") && strings.Contains(l, "workload=migrate") {
			line = l
		}
	}
	require.NotEmpty(t, line, "no LAB line:\n%s", out)
	t.Log(line)
	kv := map[string]int64{}
	for _, f := range strings.Fields(line) {
		if k, v, ok := strings.Cut(f, "="); ok {
			if n, err := strconv.ParseInt(v, 10, 64); err == nil {
				kv[k] = n
			}
		}
	}
	assert.Positive(t, kv["acked"])
	assert.GreaterOrEqual(t, kv["found"], kv["acked"])
	assert.Zero(t, kv["lost"])
	assert.Zero(t, kv["dup"])
	assert.Zero(t, kv["redials"])
	assert.Positive(t, kv["migrated"])
	atob, btoa := lab.Stats()
	t.Logf("link A→B %+v B→A %+v", atob, btoa)
}
