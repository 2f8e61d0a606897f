package interop

import (
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/remoting"
	"github.com/quivermq/quiver/internal/testserver"
	"github.com/quivermq/quiver/plugins/auth/acl"
)

// TestReadyzWhileRegistrationRefused (issue 22): a broker whose name
// server refuses its registration (ACL on the name server, and the
// broker's account is no cluster member) is not routable, so /readyz
// answers 503 with the name server's reason; once the ACL file lets it
// in, /readyz turns 200.
func TestReadyzWhileRegistrationRefused(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "plain_acl.yml")
	base := aclFile + "  - accessKey: brokerKey01\n    secretKey: brokerSecret01\n"
	require.NoError(t, os.WriteFile(file, []byte(base), 0o644))
	aclSets := []string{"--set", "acl.enabled=true", "--set", "acl.file=" + file, "--set", "acl.reload_interval=100ms",
		"--set", "acl.namesrv_enabled=true"}

	nsAddr := loopbackAddr(t)
	// The name server takes strict signatures only: the broker signs its
	// registration strictly (bound to REGISTER_BROKER, with a nonce).
	ns := &node{t: t, name: "namesrv", addr: nsAddr, logs: &testserver.Output{},
		args: append([]string{"namesrv", "--set", "namesrv.listen=" + nsAddr, "--set", "log.level=info",
			"--set", "acl.strict_signatures=require"}, aclSets...)}
	ns.ready = dialReady(nsAddr)
	ns.start()

	metrics := loopbackAddr(t)
	readyz := func() (int, string, error) {
		resp, err := http.Get("http://" + metrics + "/readyz")
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), nil
	}
	brAddr := loopbackAddr(t)
	br := &node{t: t, name: "broker", addr: brAddr, logs: &testserver.Output{}, args: append([]string{"broker",
		"--set", "broker.listen=" + brAddr, "--set", "broker.namesrv=" + nsAddr, "--set", "broker.register_interval=1s",
		"--set", "storage.dir=" + filepath.Join(dir, "store"), "--set", "metrics.listen=" + metrics, "--set", "log.level=info",
		"--set", "acl.access_key=brokerKey01", "--set", "acl.secret_key=brokerSecret01"}, aclSets...)}
	br.ready = func() error { _, _, err := readyz(); return err }
	br.start()

	var code int
	var body string
	require.Eventually(t, func() bool {
		code, body, _ = readyz()
		return code == http.StatusServiceUnavailable && strings.Contains(body, "registration refused")
	}, 20*time.Second, 50*time.Millisecond, "readyz %d %q", code, body)
	require.Contains(t, body, nsAddr)
	require.Contains(t, body, "NO_PERMISSION")
	require.Contains(t, body, "brokerKey01")

	// Make the account a cluster member: the next registration passes.
	require.NoError(t, os.WriteFile(file, []byte(base+"    role: broker\n"), 0o644))
	require.Eventually(t, func() bool {
		code, body, _ = readyz()
		return code == http.StatusOK
	}, 20*time.Second, 50*time.Millisecond, "readyz %d %q", code, body)
	route := remoting.NewRequest(remoting.GetRouteInfoByTopic, map[string]string{"topic": "TBW102"}, nil)
	acl.SignStrict(route.Code, route.ExtFields, nil, "appKey01", "appSecret01", "", time.Now())
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := rawClient(t).Invoke(ctx, nsAddr, route)
	require.NoError(t, err)
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	require.Contains(t, string(resp.Body), brAddr)
	// An ACL 1.0 signature is refused there.
	resp = signedInvoke(t, nsAddr, remoting.GetRouteInfoByTopic, map[string]string{"topic": "TBW102"}, "appKey01", "appSecret01")
	require.Equal(t, remoting.NoPermission, resp.Code)
}

func dialReady(addr string) func() error {
	return func() error {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
		}
		return err
	}
}
