package remoting

import (
	"context"
	"fmt"
	"sort"
	"sync"
)

// Interceptor runs before a request reaches its processor; a non-nil answer
// short-circuits it (authentication, flow control).
type Interceptor func(ctx context.Context, p *Peer, req *Command) *Command

// Router dispatches requests by code to handlers that modules register.
// Unknown codes answer REQUEST_CODE_NOT_SUPPORTED.
type Router struct {
	mu           sync.RWMutex
	handlers     map[int32]Handler
	interceptors []Interceptor
}

// NewRouter returns an empty router.
func NewRouter() *Router { return &Router{handlers: map[int32]Handler{}} }

// Register binds code to h. Registering a code twice is a programmer error
// and panics, naming the code.
func (r *Router) Register(code int32, h Handler) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.handlers[code]; dup {
		panic(fmt.Sprintf("remoting: request code %d registered twice", code))
	}
	r.handlers[code] = h
}

// RegisterFunc binds code to f.
func (r *Router) RegisterFunc(code int32, f func(ctx context.Context, p *Peer, req *Command) *Command) {
	r.Register(code, HandlerFunc(f))
}

// Use adds an interceptor.
func (r *Router) Use(i Interceptor) {
	r.mu.Lock()
	r.interceptors = append(r.interceptors, i)
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
func (r *Router) Handle(ctx context.Context, p *Peer, req *Command) *Command {
	r.mu.RLock()
	h, ok := r.handlers[req.Code]
	ics := r.interceptors
	r.mu.RUnlock()
	for _, ic := range ics {
		if resp := ic(ctx, p, req); resp != nil {
			return resp
		}
	}
	if !ok {
		return NewResponse(req, RequestCodeNotSupported, fmt.Sprintf(" request type %d not supported", req.Code))
	}
	return h.Handle(ctx, p, req)
}
