package pebblestore

import (
	"context"

	"github.com/quivermq/quiver/core/store"
)

// ID is the engine's name in storage.engine.
const ID = "pebble"

// Provider is the storage descriptor registered with the kernel.
type Provider = store.Descriptor[Config]

// NewProvider returns the provider (store.Define).
func NewProvider() *Provider { return store.Define(ID, NewConfig, openEngine) }

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
