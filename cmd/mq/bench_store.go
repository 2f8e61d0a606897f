package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/quivermq/quiver/core/config"
	"github.com/quivermq/quiver/core/message"
	"github.com/quivermq/quiver/core/store"
	"github.com/quivermq/quiver/plugins/storage/commitlog"
	"github.com/quivermq/quiver/plugins/storage/pebblestore"
)

// storeBenchRow is one measured combination.
type storeBenchRow struct {
	Engine     string  `json:"engine"`
	Flush      string  `json:"flush"`
	Size       int     `json:"size"`
	Producers  int     `json:"producers"`
	Messages   int64   `json:"messages"`
	MsgsPerSec float64 `json:"msgs_per_sec"`
	MBPerSec   float64 `json:"mb_per_sec"`
	P50Micros  float64 `json:"p50_us"`
	P99Micros  float64 `json:"p99_us"`
}

type storeBenchReport struct {
	// Disk is the median of DiskRuns (by sequential-write bandwidth):
	// the raw disk is measured diskRuns times before the engines run and
	// diskRuns times after.
	Disk           *diskResult        `json:"disk"`
	DiskRuns       []*diskResult      `json:"disk_runs"`
	ConcurrentSync []syncConcurrency  `json:"concurrent_fdatasync,omitempty"`
	Rows           []storeBenchRow    `json:"rows"`
	StartupMsgs    int64              `json:"startup_messages,omitempty"`
	StartupSecs    map[string]float64 `json:"startup_seconds,omitempty"`
	RecoveryBytes  int64              `json:"recovery_bytes,omitempty"`
	RecoverySecs   float64            `json:"recovery_seconds,omitempty"`
	RecoveryMBps   float64            `json:"recovery_mb_per_sec,omitempty"`
	SegmentSize    int64              `json:"segment_size"`
	DurationPerRun float64            `json:"duration_per_run_seconds"`
}

func benchStoreCmd() *cobra.Command {
	var dir, sizes, producers, flushes, output, recovery, engines string
	var startup int64
	var dur time.Duration
	var segment config.ByteSize = 64 << 20
	cmd := &cobra.Command{
		Use:   "store",
		Short: "Measure the CommitLog engine directly: append throughput and latency per flush mode, size and producer count, recovery time, next to the raw disk",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			rep := &storeBenchReport{SegmentSize: int64(segment), DurationPerRun: dur.Seconds()}
			var err error
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return err
			}
			if err := benchDiskRuns(rep, dir); err != nil {
				return err
			}
			if rep.ConcurrentSync, err = benchConcurrentSync(dir, []int{1, 2, 4}, 300*time.Millisecond); err != nil {
				return err
			}
			for _, eng := range splitCSV(engines) {
				for _, fl := range splitCSV(flushes) {
					for _, sz := range atoiCSV(sizes) {
						for _, pr := range atoiCSV(producers) {
							row, err := benchStoreRun(cmd.Context(), dir, eng, store.FlushMode(fl), int(segment), sz, pr, dur)
							if err != nil {
								return err
							}
							rep.Rows = append(rep.Rows, *row)
							fmt.Fprintf(cmd.ErrOrStderr(), "%s %s %dB ×%d: %.0f msg/s\n", eng, fl, sz, pr, row.MsgsPerSec)
						}
					}
				}
				if startup > 0 {
					secs, err := benchStartup(cmd.Context(), dir, eng, int(segment), startup)
					if err != nil {
						return err
					}
					if rep.StartupSecs == nil {
						rep.StartupSecs = map[string]float64{}
					}
					rep.StartupMsgs = startup
					rep.StartupSecs[eng] = secs
				}
			}
			if err := benchDiskRuns(rep, dir); err != nil {
				return err
			}
			if recovery != "" {
				n, err := config.ParseByteSize(recovery)
				if err != nil {
					return err
				}
				rep.RecoveryBytes = n
				if rep.RecoverySecs, err = benchRecovery(dir, n, int(segment)); err != nil {
					return err
				}
				rep.RecoveryMBps = float64(n) / rep.RecoverySecs / 1e6
			}
			return printStoreReport(cmd.OutOrStdout(), rep, output == "json")
		},
	}
	cmd.Flags().StringVar(&dir, "dir", "./data/bench-store", "scratch directory (emptied per run)")
	cmd.Flags().StringVar(&sizes, "sizes", "128,1024", "message body sizes")
	cmd.Flags().StringVar(&producers, "producers", "1,4,16", "concurrent appenders")
	cmd.Flags().StringVar(&flushes, "flush", "async,sync", "flush modes")
	cmd.Flags().StringVar(&engines, "engine", "commitlog", "storage engines: commitlog, pebble (comma list)")
	cmd.Flags().Int64Var(&startup, "startup", 0, "also time opening a store that holds this many 1 KiB messages (clean close)")
	cmd.Flags().DurationVar(&dur, "duration", 5*time.Second, "time per combination")
	cmd.Flags().Var(byteSizeFlag{&segment}, "segment-size", "commit-log segment size")
	cmd.Flags().StringVar(&recovery, "recovery", "", "also measure recovery of this much unflushed data (e.g. 1GiB)")
	cmd.Flags().StringVar(&output, "output", "table", "table | json")
	// Internal: the child that writes unflushed data and dies.
	cmd.Flags().String("write-and-die", "", "")
	cmd.Flags().MarkHidden("write-and-die") //nolint:errcheck // the flag is defined just above
	cmd.PreRunE = func(cmd *cobra.Command, _ []string) error {
		if v, _ := cmd.Flags().GetString("write-and-die"); v != "" {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return err
			}
			writeAndDie(dir, n, int(segment))
		}
		return nil
	}
	return cmd
}

type byteSizeFlag struct{ p *config.ByteSize }

func (f byteSizeFlag) String() string {
	if f.p == nil {
		return ""
	}
	return f.p.String()
}
func (f byteSizeFlag) Set(s string) error { return f.p.UnmarshalText([]byte(s)) }
func (f byteSizeFlag) Type() string       { return "size" }

func splitCSV(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

func atoiCSV(s string) []int {
	var out []int
	for _, f := range splitCSV(s) {
		if n, err := strconv.Atoi(f); err == nil && n > 0 {
			out = append(out, n)
		}
	}
	return out
}

func openEngine(engine, dir string, mode store.FlushMode, segment int, interval time.Duration) (store.Store, error) {
	if engine == "pebble" {
		return pebblestore.Open(pebblestore.NewConfig(), store.Deps{Settings: store.Settings{Dir: dir, Flush: mode, FlushInterval: interval, MaxMessageSize: 4 << 20}})
	}
	if engine != "commitlog" {
		return nil, fmt.Errorf("bench: unknown engine %q (commitlog, pebble)", engine)
	}
	return openBenchStore(dir, mode, segment, interval)
}

func openBenchStore(dir string, mode store.FlushMode, segment int, interval time.Duration) (*commitlog.Store, error) {
	cfg := commitlog.NewConfig()
	cfg.SegmentSize = config.ByteSize(segment)
	cfg.KeyIndex = false
	return commitlog.Open(cfg, store.Deps{Settings: store.Settings{Dir: dir, Flush: mode, FlushInterval: interval, MaxMessageSize: 4 << 20}})
}

func benchStoreRun(ctx context.Context, root, engine string, mode store.FlushMode, segment, size, producers int, dur time.Duration) (*storeBenchRow, error) {
	dir := filepath.Join(root, fmt.Sprintf("%s-%s-%d-%d", engine, mode, size, producers))
	os.RemoveAll(dir)
	defer os.RemoveAll(dir)
	st, err := openEngine(engine, dir, mode, segment, 500*time.Millisecond)
	if err != nil {
		return nil, err
	}
	defer st.Close()
	body := make([]byte, size)
	// One histogram and counter per producer, merged at the end: a shared
	// one would serialize the producers on its lock and be measured too.
	lats := make([]*latencies, producers)
	counts := make([]int64, producers)
	deadline := time.Now().Add(dur)
	var wg sync.WaitGroup
	var firstErr atomic.Value
	for p := 0; p < producers; p++ {
		lats[p] = newLatencies()
		wg.Add(1)
		go func(p int) {
			defer wg.Done()
			m := &message.Ext{Message: message.Message{Topic: "BenchStore", Body: body, Properties: message.Properties{"TAGS": "t"}}, QueueID: int32(p % 4)}
			msgs := []store.Message{{Ext: m}}
			lat := lats[p]
			n := int64(0)
			defer func() { counts[p] = n }()
			for t0 := time.Now(); n < 50_000_000 && t0.Before(deadline); n++ {
				if _, err := st.Append(ctx, msgs); err != nil {
					firstErr.CompareAndSwap(nil, err)
					return
				}
				t1 := time.Now()
				lat.record(t1.Sub(t0))
				t0 = t1
			}
		}(p)
	}
	start := time.Now()
	wg.Wait()
	el := time.Since(start)
	if e, ok := firstErr.Load().(error); ok && e != nil {
		return nil, e
	}
	lat := newLatencies()
	var total int64
	for p := range lats {
		lat.merge(lats[p])
		total += counts[p]
	}
	return &storeBenchRow{Engine: engine, Flush: string(mode), Size: size, Producers: producers, Messages: total,
		MsgsPerSec: float64(total) / el.Seconds(), MBPerSec: float64(total*int64(size)) / el.Seconds() / 1e6,
		P50Micros: float64(lat.quantile(0.5)) / 1e3, P99Micros: float64(lat.quantile(0.99)) / 1e3}, nil
}

// benchStartup fills a store with n 1 KiB messages over 8 queues, closes it
// cleanly and times opening it again.
func benchStartup(ctx context.Context, root, engine string, segment int, n int64) (float64, error) {
	dir := filepath.Join(root, "startup-"+engine)
	os.RemoveAll(dir)
	defer os.RemoveAll(dir)
	st, err := openEngine(engine, dir, store.FlushAsync, segment, time.Second)
	if err != nil {
		return 0, err
	}
	body := make([]byte, 1024)
	batch := make([]store.Message, 64)
	for written := int64(0); written < n; written += int64(len(batch)) {
		for i := range batch {
			batch[i] = store.Message{Ext: &message.Ext{Message: message.Message{Topic: "BenchStartup", Body: body,
				Properties: message.Properties{"UNIQ_KEY": strconv.FormatInt(written+int64(i), 16)}}, QueueID: int32(written/64) % 8}}
		}
		if _, err := st.Append(ctx, batch); err != nil {
			st.Close()
			return 0, err
		}
	}
	if err := st.Close(); err != nil {
		return 0, err
	}
	start := time.Now()
	st, err = openEngine(engine, dir, store.FlushAsync, segment, time.Second)
	if err != nil {
		return 0, err
	}
	el := time.Since(start)
	return el.Seconds(), st.Close()
}

// benchRecovery has a child process write n bytes with no checkpoint after
// the first and exit without closing (a crash of the process), then times
// opening the store, which must scan and re-dispatch all of it.
func benchRecovery(root string, n int64, segment int) (float64, error) {
	dir := filepath.Join(root, "recovery")
	os.RemoveAll(dir)
	defer os.RemoveAll(dir)
	self, err := os.Executable()
	if err != nil {
		return 0, err
	}
	child := exec.Command(self, "bench", "store", "--dir", dir, "--segment-size", strconv.Itoa(segment), "--write-and-die", strconv.FormatInt(n, 10))
	child.Stderr = os.Stderr
	if err := child.Run(); err == nil || !strings.Contains(err.Error(), "exit status 3") {
		return 0, fmt.Errorf("bench: recovery writer: %v (want exit status 3)", err)
	}
	start := time.Now()
	st, err := openBenchStore(dir, store.FlushAsync, segment, time.Hour)
	if err != nil {
		return 0, err
	}
	el := time.Since(start)
	_, max, _ := st.Offsets(store.Queue{Topic: "BenchStore", ID: 0})
	st.Close()
	if max == 0 {
		return 0, fmt.Errorf("bench: recovery found no message")
	}
	return el.Seconds(), nil
}

func writeAndDie(dir string, n int64, segment int) {
	// A flush interval of an hour: nothing after the store's first
	// checkpoint is checkpointed, so all of it is recovered by scanning.
	st, err := openBenchStore(dir, store.FlushAsync, segment, time.Hour)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	body := make([]byte, 1024)
	batch := make([]store.Message, 32)
	for i := range batch {
		batch[i] = store.Message{Ext: &message.Ext{Message: message.Message{Topic: "BenchStore", Body: body, Properties: message.Properties{}}}}
	}
	for written := int64(0); written < n; written += int64(len(batch) * (len(body) + 120)) {
		if _, err := st.Append(context.Background(), batch); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
	os.Exit(3) // no Close: the process dies with its data unflushed
}

// merge adds o's samples to l.
func (l *latencies) merge(o *latencies) {
	o.mu.Lock()
	defer o.mu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	for b, c := range o.buckets {
		l.buckets[b] += c
	}
	l.n += o.n
	l.max = max(l.max, o.max)
}

// diskRuns is how many times the raw disk is measured before the engines
// run, and again after: the host disk's bandwidth swings between runs, so
// the engines are compared with the median, and the spread is printed.
const diskRuns = 3

// benchDiskRuns measures the raw disk diskRuns times (256 MiB of 1 MiB
// sequential writes + fsync, then 200 × 4 KiB append+fdatasync, each in a
// new file) and sets r.Disk to the median of all runs so far.
func benchDiskRuns(r *storeBenchReport, dir string) error {
	for i := 0; i < diskRuns; i++ {
		d, err := benchDisk(dir, 256<<20, 1<<20)
		if err != nil {
			return err
		}
		r.DiskRuns = append(r.DiskRuns, d)
	}
	runs := slices.Clone(r.DiskRuns)
	slices.SortFunc(runs, func(a, b *diskResult) int { return cmp.Compare(a.SeqWriteMBps, b.SeqWriteMBps) })
	med := *runs[len(runs)/2]
	fs := make([]float64, len(runs))
	for i, d := range runs {
		fs[i] = d.FsyncP50Micros
	}
	slices.Sort(fs)
	med.FsyncP50Micros = fs[len(fs)/2]
	r.Disk = &med
	return nil
}

// syncConcurrency is the fdatasync rate of k goroutines each appending
// 4 KiB and fdatasyncing, on one file sized like a segment.
type syncConcurrency struct {
	Goroutines  int     `json:"goroutines"`
	SyncsPerSec float64 `json:"fdatasyncs_per_sec"`
	P50Micros   float64 `json:"p50_us"`
}

// benchConcurrentSync measures whether overlapping fdatasyncs on one file
// help this disk: k goroutines each write 4 KiB at the next offset and
// fdatasync, for dur each k.
func benchConcurrentSync(dir string, ks []int, dur time.Duration) ([]syncConcurrency, error) {
	path := filepath.Join(dir, fmt.Sprintf(".mq-bench-fdatasync-%d", os.Getpid()))
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	defer os.Remove(path)
	defer f.Close()
	const size = 256 << 20
	if err := f.Truncate(size); err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	var out []syncConcurrency
	var off atomic.Int64
	for _, k := range ks {
		lats := make([]*latencies, k)
		counts := make([]int64, k)
		errs := make([]error, k)
		deadline := time.Now().Add(dur)
		var wg sync.WaitGroup
		start := time.Now()
		for g := 0; g < k; g++ {
			lats[g] = newLatencies()
			wg.Add(1)
			go func(g int) {
				defer wg.Done()
				buf := make([]byte, 4096)
				for time.Now().Before(deadline) {
					at := (off.Add(4096) - 4096) % size
					if _, err := f.WriteAt(buf, at); err != nil {
						errs[g] = err
						return
					}
					t0 := time.Now()
					if err := fdatasync(f); err != nil {
						errs[g] = err
						return
					}
					lats[g].record(time.Since(t0))
					counts[g]++
				}
			}(g)
		}
		wg.Wait()
		el := time.Since(start)
		if err := errors.Join(errs...); err != nil {
			return nil, fmt.Errorf("bench: fdatasync: %w", err)
		}
		lat := newLatencies()
		var n int64
		for g := range lats {
			lat.merge(lats[g])
			n += counts[g]
		}
		out = append(out, syncConcurrency{Goroutines: k, SyncsPerSec: float64(n) / el.Seconds(), P50Micros: float64(lat.quantile(0.5)) / 1e3})
	}
	return out, nil
}

func printStoreReport(w io.Writer, r *storeBenchReport, asJSON bool) error {
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(r)
	}
	fmt.Fprintf(w, "raw disk (median of %d runs, before and after): sequential write %.0f MB/s, fdatasync p50 %.0fµs\n", len(r.DiskRuns), r.Disk.SeqWriteMBps, r.Disk.FsyncP50Micros)
	fmt.Fprintf(w, "  runs, MB/s:")
	for _, d := range r.DiskRuns {
		fmt.Fprintf(w, " %.0f", d.SeqWriteMBps)
	}
	fmt.Fprintf(w, "\n  runs, fdatasync p50 µs:")
	for _, d := range r.DiskRuns {
		fmt.Fprintf(w, " %.0f", d.FsyncP50Micros)
	}
	fmt.Fprintln(w)
	for _, c := range r.ConcurrentSync {
		fmt.Fprintf(w, "  %d concurrent fdatasyncs on one file: %.0f/s, p50 %.0fµs\n", c.Goroutines, c.SyncsPerSec, c.P50Micros)
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "engine\tflush\tsize\tproducers\tmsg/s\tMB/s\tp50 µs\tp99 µs\t")
	for _, row := range r.Rows {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%.0f\t%.1f\t%.0f\t%.0f\t\n", row.Engine, row.Flush, row.Size, row.Producers, row.MsgsPerSec, row.MBPerSec, row.P50Micros, row.P99Micros)
	}
	tw.Flush()
	for eng, secs := range r.StartupSecs {
		fmt.Fprintf(w, "\nstart-up of %s holding %d messages: %.2fs\n", eng, r.StartupMsgs, secs)
	}
	if r.RecoveryBytes > 0 {
		fmt.Fprintf(w, "\nrecovery of %s unflushed: %.2fs (%.0f MB/s)\n", config.ByteSize(r.RecoveryBytes), r.RecoverySecs, r.RecoveryMBps)
	}
	return nil
}
