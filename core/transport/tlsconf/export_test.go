package tlsconf

import "time"

// SetClock makes r look at its files by now's time (tests), next at
// ReloadEvery from now.
func SetClock(r *Reloader, now func() time.Time) {
	r.mu.Lock()
	r.now, r.checked = now, now()
	r.mu.Unlock()
}
