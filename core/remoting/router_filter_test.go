package remoting

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Answer filters see the processor's answers only: not an interceptor's
// refusal, not an unknown code's answer, not a held (nil) answer.
func TestRouterAnswerFilter(t *testing.T) {
	r := NewRouter()
	r.Register(1, func(_ context.Context, _ *Peer, req *Command) *Command {
		resp := NewResponse(req, Success, "")
		resp.Body = []byte("a,b,c")
		return resp
	})
	r.Register(2, func(context.Context, *Peer, *Command) *Command { return nil })
	r.Use(func(_ context.Context, _ *Peer, req *Command) *Command {
		if req.Code == 3 {
			return NewResponse(req, NoPermission, "refused")
		}
		return nil
	})
	r.Register(3, func(_ context.Context, _ *Peer, req *Command) *Command { return NewResponse(req, Success, "") })
	var seen []int32
	r.UseAnswerFilter(func(_ context.Context, _ *Peer, req, resp *Command) *Command {
		seen = append(seen, req.Code)
		resp.Body = []byte("a")
		return resp
	})
	resp := r.Handle(context.Background(), nil, NewRequest(1, nil, nil))
	require.NotNil(t, resp)
	assert.Equal(t, "a", string(resp.Body))
	assert.Nil(t, r.Handle(context.Background(), nil, NewRequest(2, nil, nil)))
	assert.Equal(t, NoPermission, r.Handle(context.Background(), nil, NewRequest(3, nil, nil)).Code)
	assert.Equal(t, RequestCodeNotSupported, r.Handle(context.Background(), nil, NewRequest(4, nil, nil)).Code)
	assert.Equal(t, []int32{1}, seen)

	r.Observe(func(int32, time.Duration, int32) {})
	resp = r.Handle(context.Background(), nil, NewRequest(1, nil, nil))
	assert.Equal(t, "a", string(resp.Body), "with observers too")
}
