package grpc_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	grpclib "google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/quivermq/quiver/core/grpcapi"
	"github.com/quivermq/quiver/internal/testserver"
)

// TestDevServesGRPCWithACL runs `mq dev` with the ACL and the gRPC
// endpoint on (once refused at start-up): the kernel's auth plugin checks
// 5.x calls through the module's wiring.
func TestDevServesGRPCWithACL(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "plain_acl.yml")
	require.NoError(t, os.WriteFile(file, []byte(aclYAML), 0o600))
	endpoints := fmt.Sprintf("127.0.0.1:%d", testserver.FreePort(t))
	testserver.StartDev(t, testserver.Options{Sets: []string{"acl.enabled=true", "acl.file=" + file, "grpc.listen=" + endpoints, "log.level=warn"}})
	conn, err := grpclib.NewClient(endpoints, grpclib.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	defer conn.Close()
	n := &node{t: t, cli: grpcapi.NewMessagingServiceClient(conn)}
	route := func(ctx context.Context) *grpcapi.Status {
		var st *grpcapi.Status
		eventually(t, 10*time.Second, func() bool {
			r, err := n.cli.QueryRoute(ctx, &grpcapi.QueryRouteRequest{Topic: res("TBW102")})
			if err != nil {
				return false // the endpoint is still starting
			}
			st = r.GetStatus()
			return true
		}, "QueryRoute answered")
		return st
	}
	assert.Equal(t, grpcapi.Code_UNAUTHORIZED, route(n.ctx()).GetCode(), "unsigned")
	assert.Equal(t, grpcapi.Code_FORBIDDEN, route(n.signed("pubuser", skPub, time.Now())).GetCode(), "no permission on TBW102")
	st := route(n.signed("adminuser", skAdmin, time.Now()))
	assert.Equal(t, grpcapi.Code_OK, st.GetCode(), st.GetMessage())
}
