// Command e2etrace prints the end-to-end timeline of a broker dump
// written by a tracing build (go build -tags e2etrace ./cmd/mq, run with
// QUIVER_E2ETRACE=<dump>, then SIGUSR1 or a stop): per-segment
// percentiles from the SEND frame read to the consumer's next PULL, held
// and immediate deliveries, and the window's GC cycles and scheduler
// latency (issue 44, docs/lab/PERFORMANCE.md).
//
//	go run ./bench/e2etrace [-gctrace mq-stderr.log] <dump>
//
// -gctrace names the broker's stderr captured with GODEBUG=gctrace=1: it
// gives each collection's whole cycle (without it only the
// stop-the-world pauses are placed).
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/quivermq/quiver/internal/e2etrace"
)

func main() {
	gctrace := flag.String("gctrace", "", "the broker's stderr with GODEBUG=gctrace=1 lines (optional)")
	flag.Usage = func() {
		fmt.Fprintln(flag.CommandLine.Output(), "usage: e2etrace [-gctrace log] <dump>")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() != 1 {
		flag.Usage()
		os.Exit(2)
	}
	if err := run(flag.Arg(0), *gctrace); err != nil {
		fmt.Fprintln(os.Stderr, "e2etrace:", err)
		os.Exit(1)
	}
}

func run(dump, gctrace string) error {
	d, err := e2etrace.ReadFile(dump)
	if err != nil {
		return err
	}
	var gc map[uint32]e2etrace.GCTrace
	if gctrace != "" {
		f, err := os.Open(gctrace)
		if err != nil {
			return err
		}
		defer f.Close()
		if gc, err = e2etrace.ParseGCTrace(f); err != nil {
			return err
		}
	}
	e2etrace.Analyze(d, gc).Write(os.Stdout)
	return nil
}
