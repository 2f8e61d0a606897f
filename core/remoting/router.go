package remoting

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Interceptor runs before a request reaches its processor; a non-nil answer
// short-circuits it (authentication, flow control). It runs on the
// handler's goroutine with the handler's request, so it is bound by the
// handler's Mode (it must not block before an Inline handler, nor keep
// anything of a KeepsNothing handler's request).
type Interceptor func(ctx context.Context, p *Peer, req *Command) *Command

// AnswerFilter runs after a registered processor answered (a non-nil
// answer) and returns the answer to send, resp or another: authorization
// narrows a list to what the sender may see. It must be cheap for the
// codes it leaves alone. It may read any request's ExtFields map.
type AnswerFilter func(ctx context.Context, p *Peer, req *Command, resp *Command) *Command

// Router dispatches requests by code to handlers that modules register.
// Unknown codes answer REQUEST_CODE_NOT_SUPPORTED.
type Router struct {
	mu           sync.RWMutex
	handlers     map[int32]route
	interceptors []Interceptor
	filters      []AnswerFilter
	observers    []func(code int32, d time.Duration, respCode int32)
	// mapReaders counts the interceptors and answer filters that may read
	// a request's ExtFields map.
	mapReaders int
	// rawSends: sends are decoded without their map (Mode.NoExtMap).
	rawSends atomic.Bool
	// inlined maps the codes of Mode.Inline to their conditions; replaced
	// whole on registration, read without the lock.
	inlined atomic.Pointer[map[int32]func() bool]
}

// Mode is what a handler's author promises at registration, in exchange
// for a faster path; the zero Mode promises nothing. The interceptors run
// before the handler, so each promise binds them too.
type Mode struct {
	// KeepsNothing promises that the handler keeps no reference to
	// req.Body, req.ExtFields or the bytes of req.RawExtFields once it
	// returns; it may keep req and strings read from them (a held pull
	// keeps req for its opaque). When it returns, the router releases the
	// request (Command.Release): a pooled header map goes back to the
	// decoder, the frame back to the transport, which reads the next
	// frame into it. Checked by the race detector: in a -race build
	// Release zeroes the frame, so a kept body reads zeros or races
	// (TestKeepsNothingZeroesKeptBody).
	KeepsNothing bool
	// NoExtMap promises that the handler reads req's extFields only with
	// Ext, ReadExt or RawExtFields, never through the field ExtFields,
	// which is nil then. Only the send codes (SEND_MESSAGE,
	// SEND_MESSAGE_V2, SEND_BATCH_MESSAGE) can promise it (another code
	// panics): while every send handler registered does, every
	// interceptor was added with it and no answer filter was, a
	// connection decodes sends without building their map
	// (codec.Options.RawSends). Checked by tests: the handler of every
	// such send gets ExtFields nil (TestNoExtMapLeavesExtFieldsNil), so
	// a handler that reads the field fails its own tests.
	NoExtMap bool
	// Inline, when not nil, promises that the handler, whenever Inline
	// returns true, answers without blocking for long: from memory or the
	// page cache, with no wait on the network, a disk flush, another
	// request or a timer. The connection's reading goroutine then runs it
	// itself instead of handing it to a worker, and writes the answers of
	// a burst with one write (inline.go); while it runs, the connection
	// reads nothing. Inline is asked per request (Always: every time), so
	// it can withdraw the promise at run time (a replica that starts
	// waiting for acks); it must be cheap and safe for concurrent use.
	// The interceptors and answer filters run on the reader too.
	Inline func() bool
}

// Always is a Mode.Inline that always holds.
func Always() bool { return true }

// NewRouter returns an empty router.
func NewRouter() *Router { return &Router{handlers: map[int32]route{}} }

type route struct {
	h HandlerFunc
	Mode
}

// Register binds code to h, with at most one Mode. Registering a code
// twice, or NoExtMap for a code other than a send, is a programmer error
// and panics, naming the code.
func (r *Router) Register(code int32, h HandlerFunc, m ...Mode) {
	rt := route{h: h}
	if len(m) > 0 {
		rt.Mode = m[0]
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.handlers[code]; dup {
		panic(fmt.Sprintf("remoting: request code %d registered twice", code))
	}
	if rt.NoExtMap && !isSend(code) {
		panic(fmt.Sprintf("remoting: request code %d (%s) registered with NoExtMap: only sends are decoded without their map", code, RequestCodeName(code)))
	}
	r.handlers[code] = rt
	if rt.Inline != nil {
		in := map[int32]func() bool{code: rt.Inline}
		if old := r.inlined.Load(); old != nil {
			maps.Copy(in, *old)
		}
		r.inlined.Store(&in)
	}
	r.updateRawSends()
}

func isSend(code int32) bool {
	return code == SendMessage || code == SendMessageV2 || code == SendBatchMessage
}

// updateRawSends decides whether sends are decoded without their map;
// the caller holds mu.
func (r *Router) updateRawSends() {
	raw := r.mapReaders == 0
	for _, c := range [...]int32{SendMessage, SendMessageV2, SendBatchMessage} {
		if rt, ok := r.handlers[c]; ok && !rt.NoExtMap {
			raw = false
		}
	}
	r.rawSends.Store(raw)
}

// inline reports whether a request of code runs on the reader.
func (r *Router) inline(code int32) bool {
	m := r.inlined.Load()
	if m == nil {
		return false
	}
	cond, ok := (*m)[code]
	return ok && cond()
}

// Use adds an interceptor, with at most one Mode, of which only NoExtMap
// means something here: the interceptor never reads the field ExtFields
// of a send (Ext, ReadExt or no extFields at all). Without it the router
// builds the map of a send before the interceptors run, and sends are
// decoded with their map.
func (r *Router) Use(i Interceptor, m ...Mode) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.interceptors = append(r.interceptors, i)
	if len(m) == 0 || !m[0].NoExtMap {
		r.mapReaders++
		r.updateRawSends()
	}
}

// UseAnswerFilter adds an answer filter.
func (r *Router) UseAnswerFilter(f AnswerFilter) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.filters = append(r.filters, f)
	r.mapReaders++
	r.updateRawSends()
}

// Observe adds f, called after each registered processor returns with the
// request code, the time the processor took and the response code (-1 when
// it answers later, as a held pull does). Interceptor answers are not
// observed. f must be cheap and safe for concurrent use (metrics).
func (r *Router) Observe(f func(code int32, d time.Duration, respCode int32)) {
	r.mu.Lock()
	r.observers = append(r.observers, f)
	r.mu.Unlock()
}

// Codes lists the registered codes in order.
func (r *Router) Codes() []int32 {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return slices.Sorted(maps.Keys(r.handlers))
}

// Handle implements Handler.
func (r *Router) Handle(ctx context.Context, p *Peer, req *Command) (resp *Command) {
	r.mu.RLock()
	rt, ok := r.handlers[req.Code]
	ics, obs, fs := r.interceptors, r.observers, r.filters
	needMap := r.mapReaders > 0
	r.mu.RUnlock()
	if needMap && req.ExtFields == nil {
		req.ExtMap() // decoded without it before Use was called
	}
	if rt.KeepsNothing {
		defer req.Release()
	}
	for _, ic := range ics {
		if resp := ic(ctx, p, req); resp != nil {
			return resp
		}
	}
	if !ok {
		return NewResponse(req, RequestCodeNotSupported, fmt.Sprintf(" request type %d not supported", req.Code))
	}
	if len(fs) > 0 {
		defer func() {
			for _, f := range fs {
				if resp != nil {
					resp = f(ctx, p, req, resp)
				}
			}
		}()
	}
	if len(obs) == 0 {
		return rt.h(ctx, p, req)
	}
	t0 := time.Now()
	resp = rt.h(ctx, p, req)
	d, rc := time.Since(t0), int32(-1)
	if resp != nil {
		rc = resp.Code
	}
	for _, f := range obs {
		f(req.Code, d, rc)
	}
	return resp
}
