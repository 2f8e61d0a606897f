package broker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/quivermq/quiver/core/remoting"
)

// ErrNoNamesrv: the broker has no name servers to ask.
var ErrNoNamesrv = errors.New("broker: no name servers configured")

// InvokeNamesrv sends a request to the broker's name servers in turn
// (signed as registrations are) and returns the first answer; build makes
// a fresh request per attempt. Modules that read cluster data (the gRPC
// endpoint's routes) use it.
func (b *Broker) InvokeNamesrv(ctx context.Context, build func() *remoting.Command) (*remoting.Command, error) {
	if len(b.cfg.Namesrv) == 0 {
		return nil, ErrNoNamesrv
	}
	var errs []error
	for _, ns := range b.cfg.Namesrv {
		req := build()
		if b.deps.Sign != nil {
			b.deps.Sign(req)
		}
		rctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		resp, err := b.nsrv.Invoke(rctx, ns, req)
		cancel()
		if err == nil {
			return resp, nil
		}
		errs = append(errs, fmt.Errorf("name server %s: %w", ns, err))
		if ctx.Err() != nil {
			break
		}
	}
	return nil, errors.Join(errs...)
}
