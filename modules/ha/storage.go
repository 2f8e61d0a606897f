package ha

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/quivermq/quiver/core/durable"
	"github.com/quivermq/quiver/core/store"
)

// Dir is the failover state directory of a store: <storage.dir>/ha (the
// epoch served last and a pending truncation).
func Dir(storageDir string) string { return filepath.Join(storageDir, "ha") }

// Truncating wraps each storage engine so that it applies a truncation
// the failover service recorded before its store opens: the cut needs the
// store closed, so the service records it and restarts the app
// (RestartExitCode), and the next open cuts.
func Truncating(engines []store.Provider) []store.Provider {
	out := make([]store.Provider, len(engines))
	for i, p := range engines {
		out[i] = truncatingProvider{p}
	}
	return out
}

type truncatingProvider struct{ store.Provider }

func (p truncatingProvider) Open(ctx context.Context, cfg any, deps store.Deps) (store.Store, error) {
	log := deps.Logger
	if log != nil {
		log = log.With("component", "ha")
	}
	if err := ApplyTruncation(ctx, p.Provider, cfg, deps, log); err != nil {
		return nil, err
	}
	return p.Provider.Open(ctx, cfg, deps)
}

// ApplyTruncation cuts the closed store as recorded in its ha directory
// (if anything is recorded), then records the epoch the cut was for and
// forgets the truncation.
func ApplyTruncation(ctx context.Context, p store.Provider, cfg any, deps store.Deps, log *slog.Logger) error {
	dir := Dir(deps.Settings.Dir)
	var tr truncation
	ok, err := readJSON(dir, truncateFile, &tr)
	if err != nil || !ok {
		return err
	}
	t, can := p.(store.Truncater)
	if !can {
		return fmt.Errorf("ha: storage engine %s cannot truncate its log (a truncation to %d is pending in %s)", p.ID(), tr.Offset, dir)
	}
	cut, err := t.TruncateLog(ctx, cfg, deps, tr.Offset)
	if err != nil {
		return fmt.Errorf("ha: truncate the commit log to %d: %w", tr.Offset, err)
	}
	if err := writeJSON(dir, epochFile, epochState{Epoch: tr.Epoch}); err != nil {
		return err
	}
	if err := os.Remove(filepath.Join(dir, truncateFile)); err != nil {
		return fmt.Errorf("ha: %w", err)
	}
	// The removal must be durable too: a truncation file back after a
	// power loss would cut the log again, below what was written since.
	if err := durable.SyncDir(dir); err != nil {
		return fmt.Errorf("ha: %w", err)
	}
	if log != nil {
		log.Warn("truncated the commit log to the new master's start", "offset", tr.Offset, "cut", cut, "epoch", tr.Epoch)
	}
	return nil
}
