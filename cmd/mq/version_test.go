package main

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestReadVersion(t *testing.T) {
	info := &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{
		{Key: "vcs.revision", Value: "abc123"}, {Key: "vcs.modified", Value: "true"}, {Key: "vcs.time", Value: "2026-01-02T03:04:05Z"}, {Key: "CGO_ENABLED", Value: "0"},
	}}
	tests := []struct {
		name          string
		stamp, commit string
		info          *debug.BuildInfo
		want          buildVersion
	}{
		{name: "build info only", info: info, want: buildVersion{Version: "(devel)", Commit: "abc123", Modified: true, Time: "2026-01-02T03:04:05Z", Go: "go1.26.0", CGO: "0"}},
		{name: "stamped", stamp: "v1.2.3", commit: "fedcba", info: info, want: buildVersion{Version: "v1.2.3", Commit: "fedcba", Modified: true, Time: "2026-01-02T03:04:05Z", Go: "go1.26.0", CGO: "0"}},
		{name: "no build info", stamp: "v1.2.3", want: buildVersion{Version: "v1.2.3", Commit: "unknown", Go: runtime.Version(), CGO: "unknown"}},
		{name: "nothing", want: buildVersion{Version: "unknown", Commit: "unknown", Go: runtime.Version(), CGO: "unknown"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.want.Platform = runtime.GOOS + "/" + runtime.GOARCH
			assert.Equal(t, tt.want, readVersion(tt.stamp, tt.commit, tt.info, tt.info != nil))
		})
	}
	var b bytes.Buffer
	readVersion("v1.2.3", "fedcba", info, true).write(&b)
	assert.Equal(t, "mq v1.2.3\ncommit: fedcba (modified)\ncommit time: 2026-01-02T03:04:05Z\ngo: go1.26.0 "+runtime.GOOS+"/"+runtime.GOARCH+" (CGO_ENABLED=0)\n", b.String())
}

// TestVersionStamped builds mq as `make release` does (-X stamps,
// CGO_ENABLED=0) and runs `mq version --json`.
func TestVersionStamped(t *testing.T) {
	if testing.Short() {
		t.Skip("builds mq")
	}
	bin := filepath.Join(t.TempDir(), "mq")
	build := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w -X main.version=v9.8.7-test -X main.commit=0123abcd", "-o", bin, ".")
	build.Env = append(build.Environ(), "CGO_ENABLED=0")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "%s", out)
	out, err = exec.Command(bin, "version", "--json").Output()
	require.NoError(t, err)
	var v buildVersion
	require.NoError(t, json.Unmarshal(out, &v))
	assert.Equal(t, "v9.8.7-test", v.Version)
	assert.Equal(t, "0123abcd", v.Commit)
	assert.Equal(t, runtime.Version(), v.Go)
	assert.Equal(t, "0", v.CGO)
}
