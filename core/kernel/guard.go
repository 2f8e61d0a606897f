package kernel

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	"go.uber.org/fx"

	"github.com/quivermq/quiver/core/auth"
	"github.com/quivermq/quiver/core/config"
	"github.com/quivermq/quiver/core/remoting"
)

// Guard is what servers need from the enabled auth plugins: interceptors
// that check every request before its processor runs, and a signer for the
// process's own outgoing requests. The zero Guard lets everything through.
type Guard struct {
	Interceptors []remoting.Interceptor
	signers      []auth.Signer
}

// Sign signs req with the first plugin that has credentials.
func (g *Guard) Sign(req *remoting.Command) {
	if g == nil {
		return
	}
	if req.ExtFields == nil {
		req.ExtFields = map[string]string{}
	}
	for _, s := range g.signers {
		if s.SignRequest(req.ExtFields, req.Body) {
			return
		}
	}
}

// Apply installs the interceptors on a router.
func (g *Guard) Apply(r *remoting.Router) {
	if g == nil {
		return
	}
	for _, ic := range g.Interceptors {
		r.Use(ic)
	}
}

// NewGuard opens every auth plugin whose section says enabled: true (e.g.
// acl.enabled), decoding the rest of its section (acl.file, ...) into the
// plugin's config. Plugins are closed on stop.
func NewGuard(lc fx.Lifecycle, cfg *config.Config, reg *AuthRegistry, log *slog.Logger) (*Guard, error) {
	g := &Guard{}
	for _, id := range reg.IDs() {
		if !cfg.Exists(id+".enabled") || !truthy(cfg.String(id+".enabled")) {
			continue
		}
		p, _ := reg.Get(id)
		pc := p.NewConfig()
		section := map[string]any{}
		for _, k := range cfg.Keys() {
			if rest, ok := cutPrefix(k, id+"."); ok && rest != "enabled" {
				section[rest] = cfg.Get(k)
			}
		}
		if err := config.FromMap(map[string]any{id: section}).Decode(id, pc); err != nil {
			return nil, err
		}
		if v, ok := pc.(interface{ Validate() error }); ok {
			if err := v.Validate(); err != nil {
				return nil, fmt.Errorf("config: %s: %w", id, err)
			}
		}
		an, az, err := p.Open(context.Background(), pc, auth.Deps{Logger: log})
		if err != nil {
			return nil, fmt.Errorf("auth %s: %w", id, err)
		}
		for _, v := range []any{an, az} {
			if c, ok := v.(io.Closer); ok {
				lc.Append(fx.StopHook(c.Close))
				break
			}
		}
		switch x := an.(type) {
		case interface{ Interceptor() remoting.Interceptor }:
			g.Interceptors = append(g.Interceptors, x.Interceptor())
		case auth.Checker:
			g.Interceptors = append(g.Interceptors, checkerInterceptor(x))
		default:
			return nil, fmt.Errorf("auth %s: the plugin offers neither an interceptor nor auth.Checker", id)
		}
		if s, ok := an.(auth.Signer); ok {
			g.signers = append(g.signers, s)
		}
		log.Info("auth plugin enabled", "plugin", id)
	}
	return g, nil
}

func checkerInterceptor(c auth.Checker) remoting.Interceptor {
	return func(ctx context.Context, p *remoting.Peer, req *remoting.Command) *remoting.Command {
		_, err := c.Check(ctx, auth.Request{Code: req.Code, RemoteAddr: p.RemoteAddr(), ExtFields: req.ExtFields, Body: req.Body})
		if err == nil {
			return nil
		}
		return remoting.NewResponse(req, remoting.NoPermission, err.Error())
	}
}

func truthy(s string) bool { return s == "true" || s == "1" || s == "yes" || s == "on" }

func cutPrefix(s, p string) (string, bool) {
	if len(s) > len(p) && s[:len(p)] == p {
		return s[len(p):], true
	}
	return "", false
}
