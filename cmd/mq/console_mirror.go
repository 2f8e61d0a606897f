package main

// The console's Mirror page: the mirror links writing into the cluster
// the console points at (their target) and its brokers' dedup windows,
// from the same report as `mq admin mirror status` and `mirror dedup`
// (admin_mirror.go): each link's state, clusters, throughput, last
// checkpoint, and per source queue its position against the source's
// max offset.

import (
	"context"
	"net/http"
)

// mirrorAnswer is GET /api/mirror's answer.
type mirrorAnswer struct {
	Links []mirrorLinkView  `json:"links"`
	Dedup []mirrorDedupView `json:"dedup"`
}

func (c *consoleServer) mirrorRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /api/mirror", c.api(func(ctx context.Context, a *adm, r *http.Request) (any, error) {
		links, err := a.mirrorLinks(ctx, nil, true)
		if err != nil {
			return nil, err
		}
		dedup, err := a.mirrorDedup(ctx)
		if err != nil {
			return nil, err
		}
		return mirrorAnswer{Links: links, Dedup: dedup}, nil
	}))
}
