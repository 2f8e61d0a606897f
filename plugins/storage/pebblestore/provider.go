package pebblestore

import (
	"context"
	"fmt"

	"github.com/quivermq/quiver/core/store"
)

// ID is the engine's name in storage.engine.
const ID = "pebble"

// Provider is the storage descriptor registered with the kernel.
type Provider struct{}

var _ store.Provider = Provider{}

// NewProvider returns the provider.
func NewProvider() Provider { return Provider{} }

// ID implements store.Provider.
func (Provider) ID() string { return ID }

// NewConfig implements store.Provider.
func (Provider) NewConfig() any { return NewConfig() }

// Open implements store.Provider.
func (Provider) Open(ctx context.Context, cfg any, deps store.Deps) (store.Store, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var c *Config
	switch v := cfg.(type) {
	case nil:
		c = NewConfig()
	case *Config:
		c = v
	default:
		return nil, fmt.Errorf("pebblestore: config is %T, want *pebblestore.Config: %w", cfg, store.ErrBadArgument)
	}
	s, err := Open(c, deps)
	if err != nil {
		return nil, err
	}
	return s, nil
}
