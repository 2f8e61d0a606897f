package main

// Console login throttling. Every login attempt is counted before its
// credentials are checked, three ways: per client address (an IPv6
// address by its /64, the block one host usually holds), per account
// (the password login's single account, or an ACL access key), and over
// the whole console. An attempt is refused with 429, unchecked, while any
// of the three has reached its limit of attempts in the last minute. A
// successful login, or one the console could not check (no broker
// answered), is taken back out of the counts, so only wrong guesses and
// checks still running count: parallel requests cannot slip past the
// limit while bcrypt runs.
//
// Counts live in fixed-size time buckets (loginBuckets of
// loginWindow/loginBuckets each), so an entry is a few words whatever the
// rate. The address and account tables hold at most loginTableSize
// entries each; when one is full, the least recently failed entry goes if
// its failures have all left the window, never a live one and never the
// whole table. A new key that finds the table full of live entries is
// not tracked on its own and is bounded by the console-wide limit alone
// (which keeps the live entries far below the table size anyway: every
// live entry holds an attempt the global limit counted).

import (
	"container/list"
	"crypto/sha256"
	"net"
	"sync"
	"time"
)

const (
	loginWindow     = time.Minute
	loginBuckets    = 6
	loginPerAddress = 20   // wrong guesses a minute from one address (/64)
	loginPerAccount = 30   // wrong guesses a minute at one account
	loginGlobal     = 120  // wrong guesses a minute at the console
	loginTableSize  = 4096 // addresses, and accounts, remembered
)

// loginStep is one bucket's span.
const loginStep = loginWindow / loginBuckets

// loginBucket is the bucket number of t.
func loginBucket(t time.Time) int64 { return t.UnixNano() / int64(loginStep) }

// failWindow counts attempts in the buckets of the last loginWindow (one
// more bucket than loginBuckets, so a full window is always covered: an
// attempt is forgotten between 60 and 70 seconds after it).
type failWindow struct {
	slot [loginBuckets + 1]int64
	n    [loginBuckets + 1]uint32
}

// count is the number of attempts in the window ending in bucket b.
func (w *failWindow) count(b int64) int {
	sum := 0
	for i, s := range w.slot {
		if s > b-int64(len(w.slot)) && s <= b {
			sum += int(w.n[i])
		}
	}
	return sum
}

// add counts one attempt in bucket b.
func (w *failWindow) add(b int64) {
	i := b % int64(len(w.slot))
	if w.slot[i] != b {
		w.slot[i], w.n[i] = b, 0
	}
	w.n[i]++
}

// undo takes back one attempt counted in bucket b, if that bucket is
// still held.
func (w *failWindow) undo(b int64) {
	i := b % int64(len(w.slot))
	if w.slot[i] == b && w.n[i] > 0 {
		w.n[i]--
	}
}

// failTable is a bounded map of failWindows, least recently counted last.
type failTable struct {
	max int
	m   map[string]*list.Element
	lru list.List // of *failEntry, most recently counted first
}

type failEntry struct {
	key string
	w   failWindow
}

func newFailTable(max int) *failTable {
	return &failTable{max: max, m: map[string]*list.Element{}}
}

// count is key's attempts in the window ending in bucket b.
func (t *failTable) count(key string, b int64) int {
	if e := t.m[key]; e != nil {
		return e.Value.(*failEntry).w.count(b)
	}
	return 0
}

// add counts an attempt of key in bucket b. When the table is full it
// makes room by dropping the least recently counted entry if nothing of
// it is left in the window; otherwise key goes uncounted and add reports
// false.
func (t *failTable) add(key string, b int64) bool {
	if e := t.m[key]; e != nil {
		e.Value.(*failEntry).w.add(b)
		t.lru.MoveToFront(e)
		return true
	}
	if len(t.m) >= t.max {
		old := t.lru.Back()
		if old == nil || old.Value.(*failEntry).w.count(b) > 0 {
			return false
		}
		t.lru.Remove(old)
		delete(t.m, old.Value.(*failEntry).key)
	}
	fe := &failEntry{key: key}
	fe.w.add(b)
	t.m[key] = t.lru.PushFront(fe)
	return true
}

// undo takes back an attempt of key counted in bucket b.
func (t *failTable) undo(key string, b int64) {
	if e := t.m[key]; e != nil {
		e.Value.(*failEntry).w.undo(b)
	}
}

// loginLimiter throttles console logins (see the file comment).
type loginLimiter struct {
	mu       sync.Mutex
	addrs    *failTable
	accounts *failTable
	global   failWindow
}

func newLoginLimiter() *loginLimiter {
	return &loginLimiter{addrs: newFailTable(loginTableSize), accounts: newFailTable(loginTableSize)}
}

// loginAttempt is a counted attempt, for loginLimiter.forget.
type loginAttempt struct {
	addr, account string
	bucket        int64
	addrCounted   bool
	acctCounted   bool
}

// loginThrottled says which limit refused an attempt.
type loginThrottled struct{ scope string }

func (e *loginThrottled) Error() string {
	return "too many failed logins " + e.scope + ", try again in a minute"
}

// begin counts an attempt at account from client address ip at now, or
// refuses it when a limit is reached.
func (l *loginLimiter) begin(ip, account string, now time.Time) (loginAttempt, error) {
	a := loginAttempt{addr: addressKey(ip), account: accountKey(account), bucket: loginBucket(now)}
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.addrs.count(a.addr, a.bucket) >= loginPerAddress:
		return a, &loginThrottled{"from this address"}
	case l.accounts.count(a.account, a.bucket) >= loginPerAccount:
		return a, &loginThrottled{"for this account"}
	case l.global.count(a.bucket) >= loginGlobal:
		return a, &loginThrottled{"at this console"}
	}
	l.global.add(a.bucket)
	a.addrCounted = l.addrs.add(a.addr, a.bucket)
	a.acctCounted = l.accounts.add(a.account, a.bucket)
	return a, nil
}

// forget takes back an attempt that was not a wrong guess (the login
// succeeded, or could not be checked).
func (l *loginLimiter) forget(a loginAttempt) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.global.undo(a.bucket)
	if a.addrCounted {
		l.addrs.undo(a.addr, a.bucket)
	}
	if a.acctCounted {
		l.accounts.undo(a.account, a.bucket)
	}
}

// addressKey is the throttling key of a client address: an IPv4 address
// itself, an IPv6 address's /64.
func addressKey(ip string) string {
	p := net.ParseIP(ip)
	if p == nil || p.To4() != nil {
		return ip
	}
	return p.Mask(net.CIDRMask(64, 128)).String() + "/64"
}

// accountKey is the throttling key of an account name: its SHA-256, so a
// guessed access key of any length takes 32 bytes.
func accountKey(account string) string {
	s := sha256.Sum256([]byte(account))
	return string(s[:])
}
