package e2etrace

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// dumpMagic is a dump's first line; a JSON Meta line and the events (7
// little-endian 64-bit words each, Meta.Events of them) follow.
const dumpMagic = "quiver-e2etrace 1\n"

// Meta describes a dump's window.
type Meta struct {
	// Seq numbers the dumps of one process from 1.
	Seq int `json:"seq"`
	// EpochUnixNano is the wall-clock time of the event clock's zero.
	EpochUnixNano int64 `json:"epoch_unix_nano"`
	// Start and End bound the window on the event clock: the previous
	// dump (or the recorder's start) and this one.
	Start int64 `json:"start"`
	End   int64 `json:"end"`
	// Events is the number of events that follow; Dropped those of the
	// window lost (the ring overwrote them or they were half-written).
	Events  int    `json:"events"`
	Dropped uint64 `json:"dropped"`
	// RingEvents is the ring's size.
	RingEvents int `json:"ring_events"`
	// Topics names the topic ids of the events (index 0 is unused).
	Topics []string `json:"topics"`
	// GC lists the collections whose stop-the-world pauses ended in the
	// window (runtime.MemStats keeps the last 256: GCMissed counts those
	// of the window beyond).
	GC       []GCCycle `json:"gc"`
	GCMissed int       `json:"gc_missed"`
	// CPUSeconds is the process's user+system CPU time in the window
	// (getrusage); GCCPUSeconds the runtime's estimate of its GC work
	// (runtime/metrics /cpu/classes/gc/total, brought up to date at the
	// end of each collection: 0 in a window without one).
	GCCPUSeconds float64 `json:"gc_cpu_seconds"`
	CPUSeconds   float64 `json:"cpu_seconds"`
	// SchedLatency is the window's runtime/metrics
	// /sched/latencies:seconds: how long goroutines waited runnable
	// before they ran.
	SchedLatency Histogram `json:"sched_latency"`
	GOMAXPROCS   int       `json:"gomaxprocs"`
	GOGC         string    `json:"gogc"`
	GOMEMLIMIT   string    `json:"gomemlimit"`
}

// GCCycle is one collection: its number (1 is the first), when its mark
// termination ended on the event clock, and its total stop-the-world
// pause.
type GCCycle struct {
	Num     uint32 `json:"num"`
	End     int64  `json:"end"`
	PauseNs int64  `json:"pause_ns"`
}

// Histogram is a runtime/metrics Float64Histogram: Counts[i] values fell
// in [Buckets[i], Buckets[i+1]); ±math.MaxFloat64 stand for the
// infinities (JSON has none).
type Histogram struct {
	Counts  []uint64  `json:"counts,omitempty"`
	Buckets []float64 `json:"buckets,omitempty"`
}

// Dump is one window of events.
type Dump struct {
	Meta
	Events []Event
}

// Write writes d in the dump format.
func (d *Dump) Write(w io.Writer) error {
	m := d.Meta
	m.Events = len(d.Events)
	js, err := json.Marshal(m)
	if err != nil {
		return fmt.Errorf("e2etrace: encode meta: %w", err)
	}
	bw := bufio.NewWriterSize(w, 1<<16)
	// bufio.Writer keeps its first error: Flush reports it.
	_, _ = bw.WriteString(dumpMagic)
	_, _ = bw.Write(js)
	_ = bw.WriteByte('\n')
	var buf [eventWords * 8]byte
	var words [eventWords]uint64
	for i := range d.Events {
		d.Events[i].pack(&words)
		for k, v := range words {
			binary.LittleEndian.PutUint64(buf[8*k:], v)
		}
		_, _ = bw.Write(buf[:])
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("e2etrace: write dump: %w", err)
	}
	return nil
}

// WriteFile writes d to path atomically (a temporary file renamed over
// it), so a reader waiting for path sees a whole dump.
func WriteFile(path string, d *Dump) error {
	f, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("e2etrace: dump: %w", err)
	}
	err = d.Write(f)
	if cerr := f.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("e2etrace: dump: %w", cerr)
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		os.Remove(f.Name())
		return fmt.Errorf("e2etrace: dump %s: %w", path, err)
	}
	return nil
}

// ErrNotDump is returned by Read for input that is not a dump.
var ErrNotDump = errors.New("e2etrace: not a dump (bad magic)")

// Read reads a dump written by Write.
func Read(r io.Reader) (*Dump, error) {
	br := bufio.NewReaderSize(r, 1<<16)
	magic := make([]byte, len(dumpMagic))
	if _, err := io.ReadFull(br, magic); err != nil || string(magic) != dumpMagic {
		return nil, ErrNotDump
	}
	line, err := br.ReadBytes('\n')
	if err != nil {
		return nil, fmt.Errorf("e2etrace: read meta: %w", err)
	}
	d := &Dump{}
	if err := json.Unmarshal(line, &d.Meta); err != nil {
		return nil, fmt.Errorf("e2etrace: decode meta: %w", err)
	}
	if d.Meta.Events < 0 || d.Meta.Events > 1<<28 {
		return nil, fmt.Errorf("e2etrace: meta says %d events", d.Meta.Events)
	}
	d.Events = make([]Event, d.Meta.Events)
	var buf [eventWords * 8]byte
	var words [eventWords]uint64
	for i := range d.Events {
		if _, err := io.ReadFull(br, buf[:]); err != nil {
			return nil, fmt.Errorf("e2etrace: event %d of %d: %w", i, d.Meta.Events, err)
		}
		for k := range words {
			words[k] = binary.LittleEndian.Uint64(buf[8*k:])
		}
		d.Events[i].unpack(&words)
	}
	return d, nil
}

// ReadFile reads the dump at path.
func ReadFile(path string) (*Dump, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("e2etrace: %w", err)
	}
	defer f.Close()
	return Read(f)
}
