package commitlog

import (
	"context"

	"github.com/quivermq/quiver/core/store"
)

// ID is the engine's name in storage.engine.
const ID = "commitlog"

// Provider is the storage descriptor registered with the kernel
// (store.Define), which also truncates a closed store (store.Truncater).
type Provider struct {
	*store.Descriptor[Config]
}

var _ store.Provider = Provider{}

// NewProvider returns the provider.
func NewProvider() Provider { return Provider{store.Define(ID, NewConfig, openEngine)} }

func openEngine(ctx context.Context, cfg *Config, deps store.Deps) (store.Store, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s, err := Open(cfg, deps)
	if err != nil {
		return nil, err
	}
	return s, nil
}
