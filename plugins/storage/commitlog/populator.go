package commitlog

import "sync"

// populator faults the active segment's pages in ahead of the writer on
// its own goroutine (async flush mode; RocketMQ's warm-up of the next
// MappedFile): most of an async Append's cost on these machines is the
// kernel providing fresh pages, and the writer holds Store.mu while it
// pays it. The writer asks for the next populateAhead bytes once it has
// used half of what is populated; it still populates synchronously what
// it needs and the populator has not reached, so a full disk is the
// writer's own error from populate, never a fault. A window's generation
// changes whenever the writer unmaps it or forgets populated pages (a cut):
// the populator works only on the current generation, under mu, which the
// writer takes before unmapping, so it never touches an unmapped window
// and never reports pages of an old one.
type populator struct {
	mu  sync.Mutex // held while populating; the writer takes it to unmap
	gen int64      // current window generation (written under mu)

	stMu    sync.Mutex
	doneGen int64 // generation of done
	done    int64 // file offset the last job populated up to

	jobs chan popJob // cap 1: the writer skips asking while one waits
}

type popJob struct {
	b        []byte // the window's mapping
	off      int64  // file offset of b[0]
	from, to int64  // file offsets to populate
	gen      int64
}

func newPopulator() *populator { return &populator{jobs: make(chan popJob, 1)} }

// run populates the requested ranges until stop is closed.
func (p *populator) run(stop <-chan struct{}) {
	for {
		select {
		case <-stop:
			return
		case j := <-p.jobs:
			p.mu.Lock()
			if j.gen == p.gen {
				if err := populate(j.b[j.from-j.off : j.to-j.off]); err == nil {
					p.stMu.Lock()
					p.doneGen, p.done = j.gen, j.to
					p.stMu.Unlock()
				}
				// An error (no space) is left for the writer's own
				// populate of the same pages to report.
			}
			p.mu.Unlock()
		}
	}
}

// populated returns how far the current window gen is populated by the
// populator (0: nothing known).
func (p *populator) populated(gen int64) int64 {
	p.stMu.Lock()
	defer p.stMu.Unlock()
	if p.doneGen != gen {
		return 0
	}
	return p.done
}

// ask requests [from, to) of the window; false when a request is waiting.
func (p *populator) ask(j popJob) bool {
	select {
	case p.jobs <- j:
		return true
	default:
		return false
	}
}

// invalidate starts a new generation: the job in progress ends first, and
// what it or earlier ones reported no longer counts. It returns the new
// generation. Called with Store.mu held.
func (p *populator) invalidate() int64 {
	p.mu.Lock()
	p.gen++
	g := p.gen
	p.mu.Unlock()
	return g
}
