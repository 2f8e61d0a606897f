package remoting

import (
	"context"
	"fmt"
	"maps"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

// Interceptor runs before a request reaches its processor; a non-nil answer
// short-circuits it (authentication, flow control).
type Interceptor func(ctx context.Context, p *Peer, req *Command) *Command

// Router dispatches requests by code to handlers that modules register.
// Unknown codes answer REQUEST_CODE_NOT_SUPPORTED.
type Router struct {
	mu           sync.RWMutex
	handlers     map[int32]route
	interceptors []Interceptor
	filters      []AnswerFilter
	observers    []func(code int32, d time.Duration, respCode int32)
	// deferred are the codes of DeferExt; mapReaders counts the
	// interceptors added with Use and the answer filters, which may read
	// a request's ExtFields map.
	deferred   map[int32]bool
	mapReaders int
	// inlined maps the codes of Inline to their conditions (nil:
	// always); replaced whole by Inline, read without the lock.
	inlined atomic.Pointer[map[int32]func() bool]
}

// AnswerFilter runs after a registered processor answered (a non-nil
// answer) and returns the answer to send, resp or another: authorization
// narrows a list to what the sender may see. It must be cheap for the
// codes it leaves alone.
type AnswerFilter func(ctx context.Context, p *Peer, req *Command, resp *Command) *Command

// UseAnswerFilter adds an answer filter.
func (r *Router) UseAnswerFilter(f AnswerFilter) {
	r.mu.Lock()
	r.filters = append(r.filters, f)
	r.mapReaders++
	r.mu.Unlock()
}

// DeferExt declares that the handlers of codes read the request's
// extFields only through RawExtFields, Command.Ext or ReadExt, never the
// ExtFields field: a Peer serving r may then decode those requests
// without building the map (ext_raw.go), as long as every interceptor was
// added with UseLazy and there is no answer filter. Only SEND_MESSAGE,
// SEND_MESSAGE_V2 and SEND_BATCH_MESSAGE are deferred; other codes are
// ignored.
func (r *Router) DeferExt(codes ...int32) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.deferred == nil {
		r.deferred = map[int32]bool{}
	}
	for _, c := range codes {
		r.deferred[c] = true
	}
}

// deferExt implements extDeferrer.
func (r *Router) deferExt(code int32) bool {
	r.mu.RLock()
	ok := r.mapReaders == 0 && r.deferred[code]
	r.mu.RUnlock()
	return ok
}

// Inline declares that the handlers of codes answer without blocking
// for long: from memory or the page cache, with no wait on the network,
// a disk flush, another request or a timer (a send with
// storage.flush=async and no synchronous replica, an offset query). A
// Peer serving r runs such a request on the connection's reading
// goroutine instead of handing it to a worker, and writes the answers of
// a burst of them with one write once the reader has drained what arrived
// (inline.go). cond, when not nil, is asked for each request and can
// turn it off at run time (a replica that starts waiting for acks); it
// must be cheap and safe for concurrent use. The interceptors and answer
// filters run for these requests as for others, on the reader too, so
// they must not block either. A handler that may block must not be
// declared: while it waits, the connection reads nothing.
func (r *Router) Inline(cond func() bool, codes ...int32) {
	r.mu.Lock()
	defer r.mu.Unlock()
	m := map[int32]func() bool{}
	if old := r.inlined.Load(); old != nil {
		maps.Copy(m, *old)
	}
	for _, c := range codes {
		m[c] = cond
	}
	r.inlined.Store(&m)
}

// inline implements inliner.
func (r *Router) inline(code int32) bool {
	m := r.inlined.Load()
	if m == nil {
		return false
	}
	cond, ok := (*m)[code]
	return ok && (cond == nil || cond())
}

// NewRouter returns an empty router.
func NewRouter() *Router { return &Router{handlers: map[int32]route{}} }

type route struct {
	h      Handler
	scoped bool
}

// Register binds code to h. Registering a code twice is a programmer error
// and panics, naming the code.
func (r *Router) Register(code int32, h Handler) { r.register(code, route{h: h}) }

// RegisterScoped binds code to h like Register, for a handler that keeps
// no reference to req.ExtFields or req.Body once it returns (it may keep
// req and the strings it read from the map). When it returns, the router
// hands a pooled header map (SEND_MESSAGE, SEND_MESSAGE_V2,
// SEND_BATCH_MESSAGE, PULL_MESSAGE requests) back to the decoder and the
// request's frame back to the transport (transport.FrameRecycler), and
// sets req.ExtFields and req.Body to nil. Interceptors must not keep the
// map or the body either.
func (r *Router) RegisterScoped(code int32, h Handler) {
	r.register(code, route{h: h, scoped: true})
}

func (r *Router) register(code int32, rt route) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.handlers[code]; dup {
		panic(fmt.Sprintf("remoting: request code %d registered twice", code))
	}
	r.handlers[code] = rt
}

// RegisterFunc binds code to f.
func (r *Router) RegisterFunc(code int32, f func(ctx context.Context, p *Peer, req *Command) *Command) {
	r.Register(code, HandlerFunc(f))
}

// Use adds an interceptor. It may read any request's ExtFields map: the
// router builds the map of a request decoded without it (DeferExt)
// before the interceptors run.
func (r *Router) Use(i Interceptor) {
	r.mu.Lock()
	r.interceptors = append(r.interceptors, i)
	r.mapReaders++
	r.mu.Unlock()
}

// UseLazy adds an interceptor that reads the extFields of the requests
// whose codes are deferred (DeferExt) only through Command.Ext or ReadExt,
// or not at all, never through the ExtFields field (that would be nil):
// unlike Use, it lets those requests be decoded without their map.
func (r *Router) UseLazy(i Interceptor) {
	r.mu.Lock()
	r.interceptors = append(r.interceptors, i)
	r.mu.Unlock()
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
	out := make([]int32, 0, len(r.handlers))
	for c := range r.handlers {
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// Handle implements Handler.
func (r *Router) Handle(ctx context.Context, p *Peer, req *Command) (resp *Command) {
	r.mu.RLock()
	rt, ok := r.handlers[req.Code]
	ics, obs, fs := r.interceptors, r.observers, r.filters
	needMap := r.mapReaders > 0
	r.mu.RUnlock()
	if needMap {
		req.ensureExtMap() // decoded without it before Use was called
	}
	if rt.scoped {
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
		return rt.h.Handle(ctx, p, req)
	}
	t0 := time.Now()
	resp = rt.h.Handle(ctx, p, req)
	d, rc := time.Since(t0), int32(-1)
	if resp != nil {
		rc = resp.Code
	}
	for _, f := range obs {
		f(req.Code, d, rc)
	}
	return resp
}
