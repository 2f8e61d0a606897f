package kernel_test

import (
	"context"
	"errors"
	"log/slog"

	"github.com/quivermq/quiver/core/config"
	"github.com/quivermq/quiver/core/filter"
	"github.com/quivermq/quiver/core/store"
	"github.com/quivermq/quiver/core/transport"
)

// fakeEngine is a storage provider that records what the kernel gives it.
type fakeEngine struct {
	id      string
	openErr error
	opened  *fakeStore
}

type engineConfig struct {
	SegmentSize config.ByteSize `koanf:"segment_size"`
}

func (c *engineConfig) Validate() error {
	if c.SegmentSize < 1024 {
		return errors.New("segment_size must be at least 1KiB")
	}
	return nil
}

func (e *fakeEngine) ID() string     { return e.id }
func (e *fakeEngine) NewConfig() any { return &engineConfig{SegmentSize: 1 << 30} }
func (e *fakeEngine) Open(_ context.Context, cfg any, deps store.Deps) (store.Store, error) {
	if e.openErr != nil {
		return nil, e.openErr
	}
	e.opened = &fakeStore{cfg: cfg.(*engineConfig), deps: deps}
	return e.opened, nil
}

// otherEngine has the same shape under another type, for duplicate IDs.
type otherEngine struct{ fakeEngine }

// fakeStore implements only Close; the other methods panic (nil embed).
type fakeStore struct {
	store.Store
	cfg    *engineConfig
	deps   store.Deps
	closed int
}

func (s *fakeStore) Close() error { s.closed++; return nil }

// fakeTransport is a transport provider that never carries anything.
type fakeTransport struct{ id string }

type transportConfig struct {
	Window int `koanf:"window"`
}

func (c *transportConfig) Validate() error {
	if c.Window <= 0 {
		return errors.New("window must be positive")
	}
	return nil
}

func (f fakeTransport) ID() string     { return f.id }
func (f fakeTransport) NewConfig() any { return &transportConfig{Window: 8} }
func (f fakeTransport) Listen(context.Context, string, any, transport.Deps) (transport.Listener, error) {
	return nil, errors.New("fake: no listening")
}
func (f fakeTransport) Dial(context.Context, string, any, transport.Deps) (transport.Conn, error) {
	return nil, errors.New("fake: no dialing")
}

func newFakeTransport() fakeTransport { return fakeTransport{id: "fake"} }

// fakeFilter and otherFilter share an ID, for duplicate detection.
type fakeFilter struct{}

func (fakeFilter) ID() string                       { return "tag" }
func (fakeFilter) Type() string                     { return filter.TypeTag }
func (fakeFilter) NewConfig() any                   { return nil }
func (fakeFilter) New(any) (filter.Compiler, error) { return nil, errors.New("fake") }

type otherFilter struct{ fakeFilter }

var (
	_ store.Provider     = (*fakeEngine)(nil)
	_ transport.Provider = fakeTransport{}
	_ filter.Provider    = fakeFilter{}
)

func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }
