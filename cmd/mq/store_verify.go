package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/quivermq/quiver/core/config"
	"github.com/quivermq/quiver/core/kernel"
	"github.com/quivermq/quiver/core/store"
	"github.com/quivermq/quiver/plugins/storage/commitlog"
)

// errDamageFound makes mq store verify exit non-zero when it found damage.
var errDamageFound = errors.New("store verify: damage found")

type verifyFlags struct {
	engine, dir string
	rate        string
	list        bool
}

// storeVerifyCmd is `mq store verify`: the offline scrubber.
func storeVerifyCmd(g *globalFlags) *cobra.Command {
	f := &verifyFlags{}
	cmd := &cobra.Command{
		Use:   "verify",
		Short: "Check every stored record and index entry of a stopped broker's store and report damage",
		Long: `Open a stopped broker's store (which runs its recovery: damaged records
are copied aside and skipped, consume queues that disagree with the commit
log are rebuilt; with pebble, a damaged WAL is copied aside and every
write after the damage applied again), then read every record and index
entry, checking their checksums, and report what was found (with pebble,
the damaged sstable blocks by queue offsets). The damage found now and
listed earlier (the damage manifest, <dir>/damaged/MANIFEST.jsonl, which
both engines write) is printed. Exits with status 1 when there is damage.
Examples:

  mq store verify --engine commitlog --dir ./data
  mq store verify --engine pebble --dir ./data`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runStoreVerify(cmd, g, f) },
	}
	cmd.Flags().StringVar(&f.engine, "engine", "commitlog", "storage engine")
	cmd.Flags().StringVar(&f.dir, "dir", "", "data directory (storage.dir of the broker)")
	cmd.Flags().StringVar(&f.rate, "rate", "0", "read at most this much a second, e.g. 64MiB (0: as fast as the disk allows)")
	cmd.Flags().BoolVar(&f.list, "list", false, "only list the damage manifest; do not open the store")
	_ = cmd.MarkFlagRequired("dir")
	return cmd
}

func runStoreVerify(cmd *cobra.Command, g *globalFlags, f *verifyFlags) error {
	dir, err := filepath.Abs(f.dir)
	if err != nil {
		return err
	}
	rate, err := config.ParseByteSize(f.rate)
	if err != nil {
		return fmt.Errorf("store verify: --rate: %w", err)
	}
	if _, err := os.Stat(dir); err != nil {
		return fmt.Errorf("store verify: %w", err)
	}
	w := cmd.OutOrStdout()
	listed, err := commitlog.ReadManifest(dir)
	if err != nil {
		fmt.Fprintf(cmd.ErrOrStderr(), "store verify: %v\n", err)
	}
	if f.list {
		printManifest(cmd, listed)
		if len(listed) > 0 {
			return errDamageFound
		}
		return nil
	}
	cfg, sp, log, err := storeConfig(g)
	if err != nil {
		return err
	}
	cfg.Set("storage.engine", f.engine)
	cfg.Set("storage.dir", dir)
	if f.engine == commitlog.ID {
		// The recovery scan covers the whole log (and checks every
		// consume-queue entry) only with the key index on; the background
		// scrub stays off.
		cfg.Set("storage.commitlog.key_index", true)
		cfg.Set("storage.commitlog.scrub_interval", "0s")
	}
	start := time.Now()
	s, err := kernel.OpenStore(cmd.Context(), cfg, sp, log)
	if err != nil {
		return fmt.Errorf("store verify: open: %w", err)
	}
	defer s.Close()
	v, ok := s.(store.Verifier)
	if !ok {
		return fmt.Errorf("store verify: the %s engine cannot verify its data", f.engine)
	}
	atOpen := v.Damage()
	rep, err := v.Verify(cmd.Context(), store.VerifyOptions{BytesPerSecond: rate})
	if err != nil {
		return fmt.Errorf("store verify: %w", err)
	}
	fmt.Fprintf(w, "verified %s (%s): %d records, %d index entries, %s in %s\n", dir, f.engine, rep.Records, rep.Entries,
		config.ByteSize(rep.Bytes), time.Since(start).Round(time.Millisecond))
	for _, d := range atOpen {
		fmt.Fprintf(w, "recovery: %s\n", describeDamage(d))
	}
	for _, d := range rep.Damage {
		fmt.Fprintf(w, "verify: %s\n", describeDamage(d))
	}
	if listed2, err := commitlog.ReadManifest(dir); err == nil {
		listed = listed2
	}
	printManifest(cmd, listed)
	if len(atOpen) > 0 || len(rep.Damage) > 0 {
		fmt.Fprintf(w, "damage: %d found at open, %d by the check, %d skipped\n", len(atOpen), len(rep.Damage), v.Skipped())
		return errDamageFound
	}
	fmt.Fprintln(w, "no damage found")
	return nil
}

func describeDamage(d store.CorruptionError) string {
	s := fmt.Sprintf("%s at %d", d.File, d.Offset)
	if d.Length > 0 {
		s += fmt.Sprintf(" (%d)", d.Length)
	}
	s += ": " + d.Reason
	if d.Copy != "" {
		s += " [copy: " + d.Copy + "]"
	}
	return s
}

func printManifest(cmd *cobra.Command, ents []commitlog.ManifestEntry) {
	w := cmd.OutOrStdout()
	if len(ents) == 0 {
		fmt.Fprintln(w, "damage manifest: empty")
		return
	}
	fmt.Fprintf(w, "damage manifest (%d):\n", len(ents))
	for _, e := range ents {
		line := fmt.Sprintf("  %s %s at %d", e.Time.Format(time.RFC3339), e.File, e.Offset)
		if e.Length > 0 {
			line += fmt.Sprintf(" (%d)", e.Length)
		}
		line += ": " + e.Reason
		if e.Skipped > 0 {
			line += fmt.Sprintf("; %d skipped", e.Skipped)
		}
		if e.Copy != "" {
			line += " [copy: " + e.Copy + "]"
		}
		fmt.Fprintln(w, line)
	}
}
