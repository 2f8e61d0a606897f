package kernel

import (
	"context"
	"fmt"

	"github.com/quivermq/quiver/core/auth"
	"github.com/quivermq/quiver/core/remoting"
)

// authorizeDeclared decides req for a plugin that offers only the declared
// interfaces: Authenticate, then Authorize what the code's row of the
// request-code table (core/remoting) needs. A resources row asks for its
// action on each topic and group (as %RETRY%<group>, IsGroup set) named
// in a header or by a stored message; names in a body (a heartbeat's
// subscriptions, a lock's queues) are left to plugins with their own
// table (auth.Checker). Cluster rows need a cluster member, admin-or-
// cluster rows one or auth.Admin, admin and listed rows auth.Admin on the
// zero Resource; client-served codes and codes without a row are refused.
// The error wraps auth.ErrUnauthenticated or auth.ErrDenied.
func authorizeDeclared(ctx context.Context, an auth.Authenticator, az auth.Authorizer, req auth.Request) error {
	p, err := an.Authenticate(ctx, req)
	if err != nil {
		return err
	}
	c, ok := remoting.Code(req.Code)
	if !ok || c.Auth.Kind == remoting.AuthRefused {
		return fmt.Errorf("%w: request code %d (%s) is not served here", auth.ErrDenied, req.Code, remoting.RequestCodeName(req.Code))
	}
	member := p.Cluster || p.Trusted
	switch c.Auth.Kind {
	case remoting.AuthPublic:
		return nil
	case remoting.AuthCluster:
		if member {
			return nil
		}
		return fmt.Errorf("%w: request code %d (%s) is for cluster members", auth.ErrDenied, req.Code, c.Name)
	case remoting.AuthAdminOrCluster:
		if member {
			return nil
		}
	case remoting.AuthResources:
		named, err := c.Auth.Names(ctx, req, true)
		if err != nil {
			return fmt.Errorf("%w: request code %d (%s): %v", auth.ErrDenied, req.Code, c.Name, err)
		}
		for _, n := range named {
			res := auth.Resource{Name: n.Name, IsGroup: n.Source.Group}
			if res.IsGroup {
				res.Name = "%RETRY%" + res.Name
			}
			if err := az.Authorize(ctx, p, res, n.Source.Perm); err != nil {
				return err
			}
		}
		return nil
	}
	return az.Authorize(ctx, p, auth.Resource{}, auth.Admin)
}

// declaredInterceptor checks each request with a plugin's declared
// interfaces (authorizeDeclared); a request with this process's own
// credential passes as a cluster member's. A refusal answers
// NO_PERMISSION with the plugin's reason.
func (g *Guard) declaredInterceptor(an auth.Authenticator, az auth.Authorizer) remoting.Interceptor {
	return func(ctx context.Context, p *remoting.Peer, req *remoting.Command) *remoting.Command {
		if g.local != nil && g.local.valid(req) {
			return nil
		}
		var remote string
		if p != nil {
			remote = p.RemoteAddr()
		}
		err := authorizeDeclared(ctx, an, az, auth.Request{Code: req.Code, RemoteAddr: remote, ExtFields: req.ExtFields, Body: req.Body, Lookup: g.lookup.get()})
		if err == nil {
			return nil
		}
		return remoting.NewResponse(req, remoting.NoPermission, err.Error())
	}
}
