package metrics

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/quivermq/quiver/core/config"
	"github.com/quivermq/quiver/internal/netlimit"
	"github.com/quivermq/quiver/internal/netlimit/netlimittest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestServeAndStop(t *testing.T) {
	s, err := New(&Config{Listen: "127.0.0.1:0"}, Deps{})
	require.NoError(t, err)
	require.NoError(t, s.Start(context.Background()))
	base := "http://" + s.Addr()
	code, body := get(t, base+"/metrics")
	assert.Equal(t, http.StatusOK, code)
	assert.Contains(t, body, "go_goroutines")
	code, _ = get(t, base+"/healthz")
	assert.Equal(t, http.StatusOK, code)
	code, _ = get(t, base+"/readyz")
	assert.Equal(t, http.StatusOK, code)
	require.NoError(t, s.Stop(context.Background()))
	http.DefaultClient.CloseIdleConnections()
}

func TestOffByDefault(t *testing.T) {
	s, err := New(NewConfig(), Deps{})
	require.NoError(t, err)
	require.NoError(t, s.Start(context.Background()))
	assert.Empty(t, s.Addr())
	require.NoError(t, s.Stop(context.Background()))
}

func TestBadAddressFailsStart(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	s, err := New(&Config{Listen: ln.Addr().String()}, Deps{})
	require.NoError(t, err)
	assert.ErrorContains(t, s.Start(context.Background()), "metrics:")

	// The mq dev default only logs when busy.
	s.soft = true
	assert.NoError(t, s.Start(context.Background()))
	assert.Empty(t, s.Addr())
}

func TestConfig(t *testing.T) {
	tests := []struct {
		give    map[string]any
		want    string
		wantErr string
	}{
		{give: map[string]any{}, want: ""},
		{give: map[string]any{"metrics": map[string]any{"listen": "127.0.0.1:9100"}}, want: "127.0.0.1:9100"},
		{give: map[string]any{"metrics": map[string]any{"listen": "nonsense"}}, wantErr: "metrics.listen"},
		{give: map[string]any{"metrics": map[string]any{"lsten": ":1"}}, wantErr: "lsten"},
	}
	for _, tt := range tests {
		t.Run(strings.TrimSpace(tt.want+tt.wantErr), func(t *testing.T) {
			c, err := NewConfigFrom(config.FromMap(tt.give))
			if tt.wantErr != "" {
				assert.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, c.Listen)
		})
	}
}

// TestEndpointBounded: the metrics endpoint is bounded as the console is
// (internal/netlimit.DefaultHTTP): connections over 64 from one IP are
// closed at accept, a header over 64KiB is refused, and it still serves.
func TestEndpointBounded(t *testing.T) {
	s, err := New(&Config{Listen: "127.0.0.1:0"}, Deps{})
	require.NoError(t, err)
	require.NoError(t, s.Start(context.Background()))
	defer func() { require.NoError(t, s.Stop(context.Background())) }()
	assert.Equal(t, 64, netlimittest.Kept(t, s.Addr(), 70), "connections kept from one IP")
	// Kept closed its connections, but the server gives a slot back only
	// once it reads their end: until then a new connection from this IP
	// is over the bound and closed at accept (an EOF, not an answer).
	s.mu.Lock()
	lim := s.ln.(*netlimit.Listener)
	s.mu.Unlock()
	require.Eventually(t, func() bool { open, _ := lim.Counts(); return open == 0 }, 10*time.Second, 5*time.Millisecond,
		"the server saw the kept connections close")

	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	cli := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	req, err := http.NewRequest(http.MethodGet, "http://"+s.Addr()+"/metrics", nil)
	require.NoError(t, err)
	req.Header.Set("X-Big", strings.Repeat("h", 256<<10))
	resp, err := cli.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusRequestHeaderFieldsTooLarge, resp.StatusCode)
	require.Eventually(t, func() bool {
		resp, err := cli.Get("http://" + s.Addr() + "/healthz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, 10*time.Second, 50*time.Millisecond, "the endpoint serves again once the connections closed")
}
