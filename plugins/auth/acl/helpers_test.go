package acl

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha1"
	"encoding/base64"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/quivermq/quiver/core/auth"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleakOptions...)
}

// Secrets of testYAML; none is a substring of another value in the file.
const (
	skUser     = "sk-user-Zq81x"
	skAdmin    = "sk-admin-Pw62y"
	skAdminPer = "sk-adminperms-Lk40v"
)

const testYAML = `
globalWhiteRemoteAddresses:
  - 10.10.103.*
  - 192.168.0.{1,2}
accounts:
  - accessKey: RocketMQ
    secretKey: ` + skUser + `
    whiteRemoteAddress: 192.168.9.*
    admin: false
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms:
      - topicA=DENY
      - topicB=PUB|SUB
      - topicC=SUB
      - topicP=PUB
    groupPerms:
      - groupA=DENY
      - groupB=PUB|SUB
      - groupC=SUB
  - accessKey: rocketmq2
    secretKey: ` + skAdmin + `
    whiteRemoteAddress: 192.168.1.*
    admin: true
  - accessKey: adminperms
    secretKey: ` + skAdminPer + `
    admin: true
    defaultGroupPerm: PUB|SUB
    topicPerms: [topicA=SUB]
`

var testSecrets = []string{skUser, skAdmin, skAdminPer}

func secretOf(ak string) string {
	switch ak {
	case "RocketMQ":
		return skUser
	case "rocketmq2":
		return skAdmin
	case "adminperms":
		return skAdminPer
	}
	return "unknown-secret"
}

func writeFile(t testing.TB, path, content string) {
	t.Helper()
	tmp := path + ".tmp"
	require.NoError(t, os.WriteFile(tmp, []byte(content), 0o600))
	require.NoError(t, os.Rename(tmp, path))
}

// newACL opens an ACL on a file holding content, without polling.
func newACL(t testing.TB, content string) (*ACL, string, *logBuffer) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "plain_acl.yml")
	writeFile(t, path, content)
	logs := &logBuffer{}
	cfg := NewConfig()
	cfg.File = path
	cfg.ReloadInterval = 0
	a, err := New(cfg, auth.Deps{Logger: logs.logger()})
	require.NoError(t, err)
	t.Cleanup(func() { a.Close() })
	return a, path, logs
}

// logBuffer collects log output safely across goroutines.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

func (l *logBuffer) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(l, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// request builds a request signed the Java way (Sign) by ak.
func signed(code int32, ext map[string]string, body []byte, ak string) auth.Request {
	ext = maps.Clone(ext)
	if ext == nil {
		ext = map[string]string{}
	}
	Sign(ext, body, ak, secretOf(ak), "")
	return auth.Request{Code: code, RemoteAddr: "172.16.0.9:51234", ExtFields: ext, Body: body}
}

// goClientSign reimplements the official Go client's signing code, which
// lives in an internal package and cannot be imported:
// github.com/apache/rocketmq-client-go/v2@v2.1.3-0.20251226070945-2173d070fd1b
// internal/remote/interceptor.go, ACLInterceptor (lines 40-75) and
// calculateSignature (lines 77-83). Like the original it signs the sorted
// values of {AccessKey} ∪ extFields, so the token is in the map but not in
// the key list, appends the body, and only then sets Signature, AccessKey
// and SecurityToken. goclient_test.go checks the real code path.
func goClientSign(ext map[string]string, body []byte, ak, sk, token string) {
	m := make(map[string]string)
	order := make([]string, 1)
	m["AccessKey"] = ak
	order[0] = "AccessKey"
	if token != "" {
		m["SecurityToken"] = token
	}
	for k, v := range ext {
		m[k] = v
		order = append(order, k)
	}
	sort.Slice(order, func(i, j int) bool { return strings.Compare(order[i], order[j]) < 0 })
	content := ""
	for idx := range order {
		content += m[order[idx]]
	}
	buf := make([]byte, len(content)+len(body))
	copy(buf, content)
	copy(buf[len(content):], body)
	mac := hmac.New(sha1.New, []byte(sk))
	mac.Write(buf)
	ext["Signature"] = base64.StdEncoding.EncodeToString(mac.Sum(nil))
	ext["AccessKey"] = ak
	if token != "" {
		ext["SecurityToken"] = token
	}
}
