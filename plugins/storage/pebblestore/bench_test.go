package pebblestore

import (
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"

	"github.com/quivermq/quiver/core/store"
	"github.com/quivermq/quiver/core/store/storetest"
)

// BenchmarkAppend appends 1 KiB messages, one per call, from parallel
// goroutines (GOMAXPROCS × parallelism) spread over 8 queues, on the
// default (small-device) configuration. fsyncs/op counts every file sync
// Pebble issued (WAL, sstables, manifest).
func BenchmarkAppend(b *testing.B) {
	for _, mode := range []store.FlushMode{store.FlushAsync, store.FlushSync} {
		for _, par := range []int{1, 4, 16} {
			b.Run(fmt.Sprintf("%s/p%d", mode, par), func(b *testing.B) {
				b.SetParallelism(par)
				set := storetest.DefaultSettings(b.TempDir())
				set.Flush = mode
				set.FlushInterval = 0 // the default, 500ms
				cfg := NewConfig()
				fs := newCountingFS()
				cfg.FS = fs
				s, err := Open(cfg, store.Deps{Logger: slog.New(slog.DiscardHandler), Settings: set})
				if err != nil {
					b.Fatal(err)
				}
				defer s.Close()
				body := string(make([]byte, 1024))
				var next atomic.Int32
				b.SetBytes(1024)
				b.ReportAllocs()
				start := fs.syncs.Load()
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					m := []store.Message{storetest.Msg("Bench", next.Add(1)%8, body, map[string]string{"TAGS": "t", "UNIQ_KEY": "C0A8000100002A9F0000000000000000"})}
					for pb.Next() {
						if _, err := s.Append(bg, m); err != nil {
							b.Error(err)
							return
						}
					}
				})
				b.StopTimer()
				b.ReportMetric(float64(fs.syncs.Load()-start)/float64(b.N), "fsyncs/op")
			})
		}
	}
}

// BenchmarkAppendBatch appends batches of 32 1 KiB messages.
func BenchmarkAppendBatch(b *testing.B) {
	set := storetest.DefaultSettings(b.TempDir())
	set.FlushInterval = 0
	s, err := Open(NewConfig(), store.Deps{Logger: slog.New(slog.DiscardHandler), Settings: set})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	body := string(make([]byte, 1024))
	var batch []store.Message
	for i := 0; i < 32; i++ {
		batch = append(batch, storetest.Msg("Bench", int32(i%4), body, nil))
	}
	b.SetBytes(32 * 1024)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Append(bg, batch); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRead reads 32-message batches of 1 KiB messages from a queue
// of 32000 (about 32 MiB, far above the block cache: sstable blocks come
// from the page cache and are decompressed), written interleaved with a
// second queue, then compacted.
func BenchmarkRead(b *testing.B) {
	for _, comp := range []string{"fastest", "none"} {
		b.Run(comp, func(b *testing.B) { benchmarkRead(b, comp) })
	}
}

func benchmarkRead(b *testing.B, comp string) {
	set := storetest.DefaultSettings(b.TempDir())
	set.FlushInterval = 0
	cfg := NewConfig()
	cfg.Compression = comp
	s, err := Open(cfg, store.Deps{Logger: slog.New(slog.DiscardHandler), Settings: set})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	body := string(make([]byte, 1024))
	q := store.Queue{Topic: "Bench", ID: 0}
	var batch []store.Message
	for i := 0; i < 32; i++ {
		batch = append(batch, storetest.Msg(q.Topic, int32(i%2), body, nil))
	}
	for i := 0; i < 2000; i++ {
		if _, err := s.Append(bg, batch); err != nil {
			b.Fatal(err)
		}
	}
	if err := s.db.Compact(bg, []byte{0}, []byte{0xff}, true); err != nil {
		b.Fatal(err)
	}
	var r store.ReadResult
	off := int64(0)
	b.SetBytes(32 * 1024)
	b.ReportAllocs()
	for b.Loop() {
		if err := s.Read(bg, q, off, store.ReadOptions{}, &r); err != nil || r.Status != store.Found {
			b.Fatal(err, r.Status)
		}
		off = r.NextOffset % 32000
	}
}

// BenchmarkLookup reads single records by physical offset.
func BenchmarkLookup(b *testing.B) {
	set := storetest.DefaultSettings(b.TempDir())
	s, err := Open(NewConfig(), store.Deps{Logger: slog.New(slog.DiscardHandler), Settings: set})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	body := string(make([]byte, 1024))
	var batch []store.Message
	for i := 0; i < 32; i++ {
		batch = append(batch, storetest.Msg("Bench", int32(i%4), body, nil))
	}
	var phys []int64
	for i := 0; i < 1000; i++ {
		pos, err := s.Append(bg, batch)
		if err != nil {
			b.Fatal(err)
		}
		for _, p := range pos {
			phys = append(phys, p.CommitLogOffset)
		}
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if _, err := s.Lookup(bg, phys[(i*7919)%len(phys)]); err != nil {
			b.Fatal(err)
		}
		i++
	}
}
