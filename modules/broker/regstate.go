package broker

import (
	"fmt"
	"sync"
	"time"

	"github.com/quivermq/quiver/core/remoting"
)

// registrations remembers, per name server, whether the broker's last
// registration was refused (an answer other than SUCCESS, such as
// NO_PERMISSION from a name server that checks ACL) or got no answer. A
// name server that does not answer is not a refusal: it may be down, and
// the others route; only when none of them takes the broker is it not
// ready.
type registrations struct {
	mu        sync.Mutex
	refused   map[string]string // name server → why
	unreached map[string]*regFailure
}

// regFailure is a name server's run of registrations without an answer.
type regFailure struct {
	err     string
	count   int
	nextLog time.Time
	backoff time.Duration
}

// Back-off of the log line of a name server that does not answer: the
// first failure logs, then one line after regLogFirst, twice that, and
// so on up to regLogMax apart.
const (
	regLogFirst = time.Minute
	regLogMax   = 30 * time.Minute
)

// unanswered records a registration with ns that got no answer at now;
// it returns how many failed in a row and whether this one is to be
// logged (once per back-off).
func (r *registrations) unanswered(ns string, err error, now time.Time) (count int, log bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.unreached == nil {
		r.unreached = map[string]*regFailure{}
	}
	f := r.unreached[ns]
	if f == nil {
		f = &regFailure{}
		r.unreached[ns] = f
	}
	f.err = err.Error()
	f.count++
	if now.Before(f.nextLog) {
		return f.count, false
	}
	switch {
	case f.backoff == 0:
		f.backoff = regLogFirst
	case f.backoff < regLogMax:
		f.backoff = min(2*f.backoff, regLogMax)
	}
	f.nextLog = now.Add(f.backoff)
	return f.count, true
}

// record notes ns's answer to a registration; it returns how many
// registrations with ns had got no answer before it.
func (r *registrations) record(ns string, resp *remoting.Command) (unanswered int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if f := r.unreached[ns]; f != nil {
		unanswered = f.count
		delete(r.unreached, ns)
	}
	if resp.Code == remoting.Success {
		delete(r.refused, ns)
		return
	}
	if r.refused == nil {
		r.refused = map[string]string{}
	}
	why := fmt.Sprintf("code %d: %s", resp.Code, resp.Remark)
	if resp.Code == remoting.NoPermission {
		why = "NO_PERMISSION: " + resp.Remark
	}
	r.refused[ns] = why
	return unanswered
}

// RegistrationRefused reports the name servers whose last answer to the
// broker's registration was a refusal, with their reasons ("" when none):
// such a broker is not routable through them, so it is not ready. When
// no name server took the broker's last registration, those that did not
// answer are reported too (the broker is routable nowhere).
func (b *Broker) RegistrationRefused() map[string]string {
	b.regs.mu.Lock()
	defer b.regs.mu.Unlock()
	nowhere := len(b.regs.unreached) > 0
	for _, ns := range b.cfg.Namesrv {
		if _, bad := b.regs.refused[ns]; !bad && b.regs.unreached[ns] == nil {
			nowhere = false
		}
	}
	if len(b.regs.refused) == 0 && !nowhere {
		return nil
	}
	out := make(map[string]string, len(b.regs.refused)+len(b.regs.unreached))
	for k, v := range b.regs.refused {
		out[k] = v
	}
	if nowhere {
		for k, f := range b.regs.unreached {
			out[k] = fmt.Sprintf("no answer to %d registrations in a row (%s); check broker.namesrv", f.count, f.err)
		}
	}
	return out
}
