package lint

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	"github.com/quivermq/quiver/internal/platforms"
)

// shortTargets are the edge targets built in -short mode (make test): a
// cold cross build of cmd/mq takes one to two minutes on CI's 2 cores, so
// CI builds the release targets other than linux/amd64 (which
// TestReleaseTargets builds) and big-endian 32-bit MIPS, which catches
// int overflows and byte-order assumptions; make soak builds them all.
var shortTargets = []string{"linux-arm64", "linux-arm-7", "darwin-arm64", "linux-mips-softfloat"}

// TestCrossCompile builds cmd/mq for every edge target (platforms.Edge) (one in -short
// mode). It is the check behind the README's "one static binary on every
// device" claim; a failure prints the compiler's message for the target
// that broke.
func TestCrossCompile(t *testing.T) {
	_, root := moduleRoot(t)
	out := t.TempDir()
	for _, tg := range platforms.Edge {
		name := tg.Name()
		t.Run(name, func(t *testing.T) {
			if testing.Short() && !slices.Contains(shortTargets, name) {
				t.Skipf("-short builds only %v (make soak builds every edge target)", shortTargets)
			}
			bin := filepath.Join(out, "mq-"+name)
			cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", bin, "./cmd/mq")
			cmd.Dir = root
			cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+tg.GOOS, "GOARCH="+tg.GOARCH)
			if tg.Env != "" {
				cmd.Env = append(cmd.Env, tg.Env)
			}
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			if err := cmd.Run(); err != nil {
				t.Fatalf("GOOS=%s GOARCH=%s %s CGO_ENABLED=0 go build ./cmd/mq: %v\n%s", tg.GOOS, tg.GOARCH, tg.Env, err, stderr.String())
			}
			fi, err := os.Stat(bin)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: %.1f MiB stripped", name, float64(fi.Size())/(1<<20))
			if fi.Size() < 1<<20 {
				t.Errorf("%s: binary of %d bytes is implausibly small", name, fi.Size())
			}
		})
	}
}
