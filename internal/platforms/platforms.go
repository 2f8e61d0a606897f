// Package platforms lists the platforms Quiver's binary is built for: the
// one list that internal/lint's cross build (every target must build as a
// static binary), the Makefile's release targets (a subset, checked by
// internal/lint TestReleaseTargets) and internal/crossarch's runs under
// qemu-user (every linux target, TestTargetsAreTheEdgeTargets) read.
package platforms

import "strings"

// Target is one platform: GOOS, GOARCH and, where the architecture has
// variants, the one variable that picks it (GOARM=7, GOMIPS=softfloat).
type Target struct {
	GOOS, GOARCH string
	Env          string
}

// Name is the target's name in test names and file names:
// linux-arm-7, linux-mips-softfloat, darwin-arm64.
func (t Target) Name() string {
	name := t.GOOS + "-" + t.GOARCH
	if t.Env != "" {
		name += "-" + strings.ToLower(strings.SplitN(t.Env, "=", 2)[1])
	}
	return name
}

// Edge are the platforms an edge device may need. 32-bit targets catch
// constants and conversions that overflow int; big-endian MIPS catches
// byte-order assumptions.
var Edge = []Target{
	{"linux", "amd64", ""},
	{"linux", "arm64", ""},
	{"linux", "arm", "GOARM=6"},
	{"linux", "arm", "GOARM=7"},
	{"linux", "386", ""},
	{"linux", "mips", "GOMIPS=softfloat"},
	{"linux", "mipsle", "GOMIPS=softfloat"},
	{"linux", "riscv64", ""},
	{"darwin", "arm64", ""},
}
