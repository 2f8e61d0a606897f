package main

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/config"
	"github.com/quivermq/quiver/core/kernel"
	"github.com/quivermq/quiver/core/store"
	"github.com/quivermq/quiver/internal/testserver"
	"github.com/quivermq/quiver/plugins/storage/commitlog"
)

// runMQ runs mq in-process with args and returns what main prints on
// stderr for the error (one "mq: " line per problem), stdout, and the
// exit code main would use.
func runMQ(t *testing.T, args ...string) (stderr, stdout string, code int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	root := newRootCmd()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	require.NoError(t, ctx.Err(), "mq %v did not return", args)
	if err == nil {
		return "", out.String(), 0
	}
	var b strings.Builder
	for _, line := range strings.Split(err.Error(), "\n") {
		fmt.Fprintln(&b, "mq:", line)
	}
	return b.String(), out.String(), exitCodeOf(err)
}

// TestStartErrors: each bad input a new user might give gets one line per
// problem that names the key (and the layer that set it) or the fix,
// without fx's dependency chain, and every problem of one configuration
// comes back at once.
func TestStartErrors(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer busy.Close()
	busyAddr := busy.Addr().String()

	// A directory another process holds: the lock file names it.
	locked := t.TempDir()
	lf, err := os.OpenFile(filepath.Join(locked, kernel.LockFile), os.O_RDWR|os.O_CREATE, 0o644)
	require.NoError(t, err)
	defer lf.Close()
	require.NoError(t, syscall.Flock(int(lf.Fd()), syscall.LOCK_EX|syscall.LOCK_NB))
	_, err = lf.WriteString("4242\n")
	require.NoError(t, err)

	// A directory written by the commitlog engine before engine files
	// existed (found by its files), and one with an engine file.
	clDir := t.TempDir()
	openCommitlog(t, clDir)
	require.NoError(t, os.Remove(filepath.Join(clDir, kernel.EngineFile)))
	marked := t.TempDir()
	openCommitlog(t, marked)

	standalone := []string{"--set", "broker.standalone=true"}
	tests := []struct {
		name string
		give []string
		env  []string
		want []string
		code int
	}{
		{name: "typo key", give: append([]string{"broker", "--check-config", "--set", "broker.lissten=127.0.0.1:1"}, standalone...),
			want: []string{"unknown key broker.lissten; did you mean broker.listen? (from --set)"}},
		{name: "unknown section", give: append([]string{"broker", "--check-config", "--set", "brokr.listen=127.0.0.1:1"}, standalone...),
			want: []string{"unknown section brokr; did you mean broker? (from --set)"}},
		{name: "unknown env section", give: append([]string{"broker", "--check-config"}, standalone...),
			env:  []string{"QUIVER_BROKR__LISTEN=127.0.0.1:1"},
			want: []string{"unknown section brokr; did you mean broker? (from environment variable QUIVER_BROKR__LISTEN)"}},
		{name: "auth section", give: append([]string{"broker", "--check-config", "--set", "auth.anything=1"}, standalone...),
			want: []string{"unknown key auth.anything (from --set)"}},
		{name: "typo auth plugin", give: append([]string{"broker", "--check-config", "--set", "auth.acll.enabled=true"}, standalone...),
			want: []string{"unknown key auth.acll; did you mean auth.acl? (from --set)"}},
		{name: "unknown key under auth.acl", give: append([]string{"broker", "--check-config", "--set", "auth.acl.fiel=plain_acl.yml"}, standalone...),
			want: []string{"unknown key auth.acl.fiel; did you mean auth.acl.file? (from --set)"}},
		{name: "unknown key under the old spelling acl", give: append([]string{"broker", "--check-config", "--set", "acl.fiel=plain_acl.yml"}, standalone...),
			want: []string{"unknown key acl.fiel; did you mean acl.file? (from --set)"}},
		{name: "both spellings of one auth key", give: append([]string{"broker", "--check-config", "--set", "auth.acl.file=a.yml", "--set", "acl.file=b.yml"}, standalone...),
			want: []string{"auth.acl.file and acl.file (from --set) are both set: acl.* is the old spelling of auth.acl.*; keep one (from --set)"}},
		{name: "auth.acl keys while disabled", give: append([]string{"broker", "--check-config", "--set", "auth.acl.file=a.yml"}, standalone...),
			want: []string{"auth.acl is set but auth.acl.enabled is false: its keys do nothing (set auth.acl.enabled: true, or remove them) (from --set)"}},
		{name: "typo transport section", give: append([]string{"broker", "--check-config", "--set", "transport.quik.x=1"}, standalone...),
			want: []string{"unknown key transport.quik; did you mean transport.quic? (from --set)"}},
		{name: "quic key without quic", give: append([]string{"broker", "--check-config", "--set", "transport.quic.idle_timeout=1m"}, standalone...),
			want: []string{"transport.quic is set but QUIC is not enabled: its keys do nothing (add quic to transports, or remove them) (from --set)"}},
		{name: "unknown quic key without quic", give: append([]string{"broker", "--check-config", "--set", "transport.quic.bogus=1"}, standalone...),
			want: []string{"unknown key transport.quic.bogus (from --set)"}},
		{name: "pebble keys with commitlog", give: append([]string{"broker", "--check-config", "--set", "storage.pebble.max_open_files=64", "--set", "storage.pebble.bogus=1"}, standalone...),
			want: []string{"storage.pebble is set but storage.engine is commitlog: its keys do nothing (remove them, or set storage.engine: pebble) (from --set)",
				"unknown key storage.pebble.bogus (from --set)"}},
		{name: "notaport", give: append([]string{"broker", "--check-config", "--set", "broker.listen=notaport"}, standalone...),
			want: []string{`broker.listen: "notaport" is not host:port (from --set)`}},
		{name: "fast", give: append([]string{"broker", "--check-config", "--set", "storage.flush_interval=fast"}, standalone...),
			want: []string{`storage.flush_interval: "fast" is not a duration (e.g. 500ms) (from --set)`}},
		{name: "negative retention", give: append([]string{"broker", "--check-config"}, standalone...),
			env:  []string{"QUIVER_STORAGE__RETENTION=-5h"},
			want: []string{"storage.retention: -5h must not be negative (from environment variable QUIVER_STORAGE__RETENTION)"}},
		{name: "broker without namesrv", give: []string{"broker", "--check-config"},
			want: []string{"broker.namesrv is empty: the broker would register with no name server and no client could find it (list the name servers, or set broker.standalone: true)"}},
		{name: "several at once", give: []string{"broker", "--check-config", "--set", "broker.lissten=x", "--set", "broker.listen=notaport",
			"--set", "storage.flush_interval=fast", "--set", "storage.retention=-5h", "--set", "brokr.x=1"},
			want: []string{
				"unknown section brokr; did you mean broker? (from --set)",
				"unknown key broker.lissten; did you mean broker.listen? (from --set)",
				`broker.listen: "notaport" is not host:port (from --set)`,
				`storage.flush_interval: "fast" is not a duration (e.g. 500ms) (from --set)`,
				"storage.retention: -5h must not be negative (from --set)",
				"broker.namesrv is empty: the broker would register with no name server and no client could find it (list the name servers, or set broker.standalone: true)",
			}},
		{name: "busy port", give: append([]string{"broker", "--set", "broker.listen=" + busyAddr, "--set", "storage.dir=" + t.TempDir(), "--set", "log.level=error"}, standalone...),
			want: []string{fmt.Sprintf("broker.listen %s is in use (set broker.listen or stop the other process)", busyAddr)}},
		{name: "locked dir", give: append([]string{"broker", "--set", "broker.listen=127.0.0.1:0", "--set", "storage.dir=" + locked, "--set", "log.level=error"}, standalone...),
			want: []string{fmt.Sprintf("storage.dir %s is in use by process 4242 (stop it, or set storage.dir to another directory)", locked)}},
		{name: "engine mismatch found by files", give: append([]string{"broker", "--set", "broker.listen=127.0.0.1:0", "--set", "storage.dir=" + clDir,
			"--set", "storage.engine=pebble", "--set", "log.level=error"}, standalone...),
			want: []string{fmt.Sprintf("storage.dir %s holds a commitlog store but storage.engine is pebble (set storage.engine: commitlog, or convert the data: mq store migrate --from-engine commitlog --from %s --to-engine pebble --to <new dir>)", clDir, clDir)}},
		{name: "engine mismatch by engine file", give: append([]string{"broker", "--set", "broker.listen=127.0.0.1:0", "--set", "storage.dir=" + marked,
			"--set", "storage.engine=pebble", "--set", "log.level=error"}, standalone...),
			want: []string{fmt.Sprintf("storage.dir %s holds a commitlog store but storage.engine is pebble (set storage.engine: commitlog, or convert the data: mq store migrate --from-engine commitlog --from %s --to-engine pebble --to <new dir>)", marked, marked)}},
		{name: "--set on mq admin", give: []string{"admin", "--set", "broker.listen=x", "topic", "list"}, code: 2,
			want: []string{"mq admin does not read --set (it configures servers: mq namesrv, broker, dev and store); see mq admin --help for its own flags"}},
		{name: "--config on mq bench", give: []string{"bench", "produce", "--config", "x.yaml"}, code: 2,
			want: []string{"mq bench does not read --config (it configures servers: mq namesrv, broker, dev and store); see mq bench --help for its own flags"}},
		{name: "--set on mq plugins", give: []string{"plugins", "--set", "a.b=c"}, code: 2,
			want: []string{"mq plugins does not read --set (it configures servers: mq namesrv, broker, dev and store); see mq plugins --help for its own flags"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, kv := range tt.env {
				k, v, _ := strings.Cut(kv, "=")
				t.Setenv(k, v)
			}
			stderr, _, code := runMQ(t, tt.give...)
			var want strings.Builder
			for _, w := range tt.want {
				fmt.Fprintln(&want, "mq:", w)
			}
			assert.Equal(t, want.String(), stderr)
			wantCode := tt.code
			if wantCode == 0 {
				wantCode = 1
			}
			assert.Equal(t, wantCode, code)
			for _, fxText := range []string{"could not build", "fx.", ".go:", "received non-nil error"} {
				assert.NotContains(t, stderr, fxText)
			}
		})
	}
}

// openCommitlog writes a commitlog store into dir through the kernel, as
// a broker would, and closes it.
func openCommitlog(t *testing.T, dir string) {
	t.Helper()
	spec := kernel.Spec{Plugins: kernel.Plugins{Storage: []store.Provider{commitlog.NewProvider()}}}
	cfg := config.FromMap(map[string]any{"storage.dir": dir, "storage.commitlog.segment_size": "1MiB"})
	st, err := kernel.OpenStore(context.Background(), cfg, spec, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	require.NoError(t, st.Close())
	require.FileExists(t, filepath.Join(dir, kernel.EngineFile))
}

// TestCheckConfigOpensNothing: --check-config validates without creating
// the data directory or binding anything.
func TestCheckConfigOpensNothing(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "never")
	stderr, stdout, code := runMQ(t, "dev", "--check-config", "--set", "storage.dir="+dir, "--set", "namesrv.kv_config_path="+filepath.Join(dir, "kv.json"))
	require.Equal(t, 0, code, stderr)
	assert.Equal(t, "configuration OK\n", stdout)
	assert.NoDirExists(t, dir)
}

// TestStartErrorDebugKeepsChain: under log.level=debug the line is
// followed by fx's chain.
func TestStartErrorDebugKeepsChain(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer busy.Close()
	stderr, _, _ := runMQ(t, "broker", "--set", "broker.standalone=true", "--set", "broker.listen="+busy.Addr().String(),
		"--set", "storage.dir="+t.TempDir(), "--set", "log.level=debug")
	lines := strings.Split(strings.TrimSpace(stderr), "\n")
	require.GreaterOrEqual(t, len(lines), 2, stderr)
	assert.Equal(t, fmt.Sprintf("mq: broker.listen %s is in use (set broker.listen or stop the other process)", busy.Addr()), lines[0])
	assert.Contains(t, stderr, "(debug)")
}

// TestStartErrorWholeStderr runs the mq binary: a busy port prints one
// line on stderr and nothing else (fx's own failure logs are debug).
func TestStartErrorWholeStderr(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer busy.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, testserver.Binary(t), "namesrv", "--set", "namesrv.listen="+busy.Addr().String())
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	require.Error(t, cmd.Run())
	require.NoError(t, ctx.Err())
	assert.Equal(t, fmt.Sprintf("mq: namesrv.listen %s is in use (set namesrv.listen or stop the other process)\n", busy.Addr()), stderr.String())
}
