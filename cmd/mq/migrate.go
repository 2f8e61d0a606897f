package main

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/quivermq/quiver/core/config"
	"github.com/quivermq/quiver/core/durable"
	"github.com/quivermq/quiver/core/kernel"
	"github.com/quivermq/quiver/core/store"
	"github.com/quivermq/quiver/core/store/migrate"
)

// storeCmd groups the offline storage tools.
func storeCmd(g *globalFlags) *cobra.Command {
	cmd := &cobra.Command{Use: "store", Short: "Offline storage tools (the broker must be stopped)"}
	cmd.AddCommand(storeMigrateCmd(g), storeVerifyCmd(g))
	return cmd
}

type migrateFlags struct {
	fromEngine, from string
	toEngine, to     string
	verify           bool
	allowRebase      bool
}

func storeMigrateCmd(g *globalFlags) *cobra.Command {
	f := &migrateFlags{}
	cmd := &cobra.Command{
		Use:   "migrate",
		Short: "Copy a stopped broker's messages and metadata into another storage engine",
		Long: `Copy every message (queue offsets, store timestamps, tag codes, keys and
properties) and every metadata document (topics, consumer offsets,
subscription groups) from one data directory and engine to another. The
target must be empty; an interrupted migration is resumed by running the
same command again. Engine sections (storage.<engine>.*) come from --config
and --set. Example:

  mq store migrate --from-engine commitlog --from ./data --to-engine pebble --to ./data-pebble`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runMigrate(cmd, g, f) },
	}
	cmd.Flags().StringVar(&f.fromEngine, "from-engine", "commitlog", "source storage engine")
	cmd.Flags().StringVar(&f.from, "from", "", "source data directory (storage.dir of the source broker)")
	cmd.Flags().StringVar(&f.toEngine, "to-engine", "pebble", "target storage engine")
	cmd.Flags().StringVar(&f.to, "to", "", "target data directory")
	cmd.Flags().BoolVar(&f.verify, "verify", true, "compare every copied message after the copy")
	cmd.Flags().BoolVar(&f.allowRebase, "allow-rebase", false, "let queues whose min offset is above 0 start at 0 in a target that cannot start them there")
	_ = cmd.MarkFlagRequired("from")
	_ = cmd.MarkFlagRequired("to")
	return cmd
}

// storeConfig reads the configuration mq store's commands open a store
// with (kernel.OpenStore): the broker's, the broker's spec with mq's
// storage engines as they are (no failover truncation) and the process
// logger.
func storeConfig(g *globalFlags) (*config.Config, kernel.Spec, *slog.Logger, error) {
	s := spec(roleBroker)
	s.Plugins = plugins()
	cfg, err := loadConfig(g, roleBroker)
	if err != nil {
		return nil, s, nil, err
	}
	log, err := kernel.NewLogger(cfg)
	return cfg, s, log, err
}

func runMigrate(cmd *cobra.Command, g *globalFlags, f *migrateFlags) error {
	from, err := filepath.Abs(f.from)
	if err != nil {
		return err
	}
	to, err := filepath.Abs(f.to)
	if err != nil {
		return err
	}
	if from == to {
		return fmt.Errorf("store migrate: --from and --to are the same directory")
	}
	if _, err := os.Stat(from); err != nil {
		return fmt.Errorf("store migrate: source: %w", err)
	}
	cfg, s, log, err := storeConfig(g)
	if err != nil {
		return err
	}
	open := func(engine, dir string) (store.Store, error) {
		cfg.Set("storage.engine", engine)
		cfg.Set("storage.dir", dir)
		return kernel.OpenStore(cmd.Context(), cfg, s, log)
	}
	src, err := open(f.fromEngine, from)
	if err != nil {
		return err
	}
	defer src.Close()
	dst, err := open(f.toEngine, to)
	if err != nil {
		return err
	}
	defer dst.Close()

	out := cmd.ErrOrStderr()
	var last time.Time
	opts := migrate.Options{
		Source:      f.fromEngine + ":" + from,
		MetaNames:   metaNames(from),
		Verify:      f.verify,
		AllowRebase: f.allowRebase,
		Progress: func(p migrate.Progress) {
			if p.Phase == "copy" && time.Since(last) < 200*time.Millisecond && p.Messages < p.Total {
				return
			}
			last = time.Now()
			printProgress(out, p)
		},
	}
	rep, err := migrate.Migrate(cmd.Context(), src, dst, opts)
	fmt.Fprintln(out)
	if err != nil {
		return fmt.Errorf("store migrate: %w (run the same command again to resume)", err)
	}
	journals, err := copyJournals(from, to)
	if err != nil {
		return fmt.Errorf("store migrate: %w (run the same command again to resume)", err)
	}
	rep.Meta = append(rep.Meta, journals...)
	w := cmd.OutOrStdout()
	fmt.Fprintf(w, "migrated %s (%s) to %s (%s): %d queues, %d messages, %s in %s\n",
		from, f.fromEngine, to, f.toEngine, rep.Queues, rep.Messages, config.ByteSize(rep.Bytes), rep.Elapsed.Round(time.Millisecond))
	if rep.Resumed {
		fmt.Fprintf(w, "resumed: %d messages were already copied\n", rep.Skipped)
	}
	fmt.Fprintf(w, "verified: %d messages in the target (%d compared field by field); metadata: %s\n", rep.Counted, rep.Verified, strings.Join(rep.Meta, ", "))
	if !rep.TimestampsKept {
		fmt.Fprintf(w, "note: the %s engine stamps copies with the migration time; store timestamps were not kept\n", f.toEngine)
	}
	for q, sh := range rep.Rebased {
		fmt.Fprintf(w, "note: %s starts at 0 instead of %d; consumer offsets of it are %d too high\n", q, sh, sh)
	}
	return nil
}

func printProgress(w io.Writer, p migrate.Progress) {
	pct := 100.0
	if p.Total > 0 {
		pct = float64(p.Messages) * 100 / float64(p.Total)
	}
	fmt.Fprintf(w, "\r%-8s %d/%d messages (%.1f%%) %s   ", p.Phase, p.Messages, p.Total, pct, config.ByteSize(p.Bytes))
}

// copyJournals copies the broker's metadata journals (config/*.journal:
// topic and subscription-group changes not yet folded into their
// documents, as after a crash) next to the documents just copied, which
// name the last journal record they hold, so the target broker replays
// exactly what they lack. The copies are made durable.
func copyJournals(from, to string) ([]string, error) {
	files, _ := filepath.Glob(filepath.Join(from, "config", "*.journal"))
	var out []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("copy journal %s: %w", f, err)
		}
		dir := filepath.Join(to, "config")
		if err := durable.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("copy journal %s: %w", f, err)
		}
		if err := durable.WriteFile(filepath.Join(dir, filepath.Base(f)), b, 0o644); err != nil {
			return nil, fmt.Errorf("copy journal %s: %w", f, err)
		}
		out = append(out, filepath.Base(f))
	}
	return out, nil
}

// metaNames are the documents to copy from a source that cannot list its
// own: the broker's, plus every config/<name>.json in the directory (the
// CommitLog engine's and the broker's fallback layout).
func metaNames(dir string) []string {
	names := slices.Clone(migrate.DefaultMetaNames)
	files, _ := filepath.Glob(filepath.Join(dir, "config", "*.json"))
	for _, f := range files {
		n := strings.TrimSuffix(filepath.Base(f), ".json")
		if !strings.HasPrefix(n, ".") && !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	return names
}
