package commitlog

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quivermq/quiver/core/store"
	"github.com/quivermq/quiver/core/store/storetest"
)

// BenchmarkAppend appends one message per call from 1, 4 or 16
// goroutines (spread over 8 queues), async and sync, 128 B and 1 KiB.
func BenchmarkAppend(b *testing.B) {
	for _, mode := range []store.FlushMode{store.FlushAsync, store.FlushSync} {
		for _, size := range []int{128, 1024} {
			for _, goroutines := range []int{1, 4, 16} {
				b.Run(fmt.Sprintf("%s/%dB/g%d", mode, size, goroutines), func(b *testing.B) {
					set := storetest.DefaultSettings(b.TempDir())
					set.Flush = mode
					set.FlushInterval = 0
					s, err := Open(NewConfig(), store.Deps{Logger: slog.New(slog.DiscardHandler), Settings: set})
					if err != nil {
						b.Fatal(err)
					}
					defer s.Close()
					body := string(make([]byte, size))
					var left atomic.Int64
					left.Store(int64(b.N))
					b.SetBytes(int64(size))
					b.ReportAllocs()
					b.ResetTimer()
					var wg sync.WaitGroup
					for g := 0; g < goroutines; g++ {
						wg.Add(1)
						go func(g int) {
							defer wg.Done()
							m := []store.Message{storetest.Msg("Bench", int32(g%8), body, map[string]string{"TAGS": "t", "UNIQ_KEY": "C0A8000100002A9F0000000000000000"})}
							for left.Add(-1) >= 0 {
								if _, err := s.Append(bg, m); err != nil {
									b.Error(err)
									return
								}
							}
						}(g)
					}
					wg.Wait()
					b.StopTimer()
					b.ReportMetric(float64(s.syncs.Load())/float64(b.N), "fsyncs/op")
					b.ReportMetric(float64(s.writes.Load())/float64(b.N), "writes/op")
				})
			}
		}
	}
}

// BenchmarkAppendBatch appends batches of 32 1 KiB messages.
func BenchmarkAppendBatch(b *testing.B) {
	set := storetest.DefaultSettings(b.TempDir())
	set.FlushInterval = 0 // the default, 500ms
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

// BenchmarkRead reads 32-message batches of 1 KiB messages.
func BenchmarkRead(b *testing.B) {
	set := storetest.DefaultSettings(b.TempDir())
	set.FlushInterval = 0 // the default, 500ms
	s, err := Open(NewConfig(), store.Deps{Logger: slog.New(slog.DiscardHandler), Settings: set})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	body := string(make([]byte, 1024))
	q := store.Queue{Topic: "Bench", ID: 0}
	var batch []store.Message
	for i := 0; i < 32; i++ {
		batch = append(batch, storetest.Msg(q.Topic, q.ID, body, nil))
	}
	for i := 0; i < 1000; i++ {
		if _, err := s.Append(bg, batch); err != nil {
			b.Fatal(err)
		}
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

// BenchmarkRecover opens a store holding 64Ki 1 KiB messages in its last
// segment without a checkpoint, so every record is verified and
// re-dispatched, and the key index is rebuilt.
func BenchmarkRecover(b *testing.B) {
	set := storetest.DefaultSettings(b.TempDir())
	s, err := Open(NewConfig(), store.Deps{Logger: slog.New(slog.DiscardHandler), Settings: set})
	if err != nil {
		b.Fatal(err)
	}
	body := string(make([]byte, 1024))
	var batch []store.Message
	for i := 0; i < 64; i++ {
		batch = append(batch, storetest.Msg("Bench", int32(i%8), body, map[string]string{"TAGS": "t", "UNIQ_KEY": fmt.Sprint(i)}))
	}
	for i := 0; i < 1024; i++ {
		if _, err := s.Append(bg, batch); err != nil {
			b.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(64 * 1024 * 1024)
	for b.Loop() {
		b.StopTimer()
		if err := os.Remove(filepath.Join(set.Dir, checkpointName)); err != nil {
			b.Fatal(err)
		}
		if err := os.RemoveAll(filepath.Join(set.Dir, "consumequeue")); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		s, err := Open(NewConfig(), store.Deps{Logger: slog.New(slog.DiscardHandler), Settings: set})
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		if err := s.Close(); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
}

// BenchmarkReadInterleaved reads a backlog of 4 or 16 queues written
// interleaved (one message per queue in turn, as producers spreading over
// queues write it), 32 messages per Read, the queues in turn, with span
// reads off ("single": one read per non-contiguous record, as before) and
// on ("span"). An op is one Read; reads/op counts commit-log reads.
func BenchmarkReadInterleaved(b *testing.B) {
	const total = 16384
	for _, nq := range []int{4, 16} {
		for _, size := range []int{128, 1024} {
			b.Run(fmt.Sprintf("q%d/%dB", nq, size), func(b *testing.B) {
				set := storetest.DefaultSettings(b.TempDir())
				set.FlushInterval = 0 // the default, 500ms
				s, err := Open(NewConfig(), store.Deps{Logger: slog.New(slog.DiscardHandler), Settings: set})
				if err != nil {
					b.Fatal(err)
				}
				defer s.Close()
				body := string(make([]byte, size))
				var batch []store.Message
				for q := 0; q < nq; q++ {
					batch = append(batch, storetest.Msg("Bench", int32(q), body, map[string]string{"TAGS": "t"}))
				}
				for i := 0; i < total/nq; i++ {
					if _, err := s.Append(bg, batch); err != nil {
						b.Fatal(err)
					}
				}
				for _, mode := range []struct {
					name string
					gap  int64
				}{{"single", -1}, {"span", 0}} {
					b.Run(mode.name, func(b *testing.B) {
						s.ra.gap.Store(mode.gap)
						defer s.ra.gap.Store(0)
						var r store.ReadResult
						cur := make([]int64, nq)
						reads0 := s.ra.reads.Load()
						msgs := 0
						b.ReportAllocs()
						b.ResetTimer()
						for i := 0; i < b.N; i++ {
							q := i % nq
							if err := s.Read(bg, store.Queue{Topic: "Bench", ID: int32(q)}, cur[q], store.ReadOptions{}, &r); err != nil || r.Status != store.Found {
								b.Fatal(err, r.Status)
							}
							msgs += len(r.Records)
							cur[q] = r.NextOffset % int64(total/nq)
						}
						b.StopTimer()
						b.ReportMetric(float64(s.ra.reads.Load()-reads0)/float64(b.N), "reads/op")
						b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(msgs), "ns/msg")
					})
				}
			})
		}
	}
}

// BenchmarkSyncOneAtATime is flush=sync with writers that each send one
// message at a time, each waiting for its answer before the next (the
// "sync-durable ... producer(s), sync" rows of bench/peers without the
// network). msgs/fsync is how many appends a commit-log fdatasync carried
// on average (the writers' best is one round of all of them), µs/fsync
// what one took.
func BenchmarkSyncOneAtATime(b *testing.B) {
	for _, writers := range []int{1, 8, 16} {
		{
			b.Run(fmt.Sprintf("writers=%d", writers), func(b *testing.B) {
				set := settings(b, store.FlushSync)
				set.FlushInterval = time.Hour // only group commits sync
				s := openStore(b, NewConfig(), set)
				defer s.Close()
				body := strings.Repeat("x", 1024)
				before := s.syncs.Load()
				var next atomic.Int64
				var wg sync.WaitGroup
				b.ResetTimer()
				for w := 0; w < writers; w++ {
					wg.Add(1)
					go func(w int) {
						defer wg.Done()
						for next.Add(1) <= int64(b.N) {
							if _, err := s.Append(bg, []store.Message{msg("OneAtATime", int32(w%4), body)}); err != nil {
								b.Error(err)
								return
							}
						}
					}(w)
				}
				wg.Wait()
				b.StopTimer()
				if n := s.syncs.Load() - before; n > 0 {
					b.ReportMetric(float64(b.N)/float64(n), "msgs/fsync")
					st := s.SyncStats()
					b.ReportMetric(float64(st.Total.Microseconds())/float64(st.Syncs), "µs/fsync")
				}
			})
		}
	}
}
