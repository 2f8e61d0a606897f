package main

// The web console: `mq console --namesrv …` and, in `mq dev`,
// console.listen (default 127.0.0.1:8080). One embedded page over a JSON
// API built on the mq admin functions, with a URL route per page and
// object (/topics/<name>, /groups/<g>, /messages/<id>, …: every path
// that is no file and not under /api/ serves the page). Read-only unless
// started with admin rights (--admin, console.admin): the page asks
// /api/session and offers actions only when they are allowed, and the API
// refuses them otherwise. console_security.go is the same-origin, CSRF and
// login layer every request passes. mq dev's console has admin rights on
// loopback; a console with admin rights on any other address needs
// console.auth.

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"go.uber.org/fx"

	"github.com/quivermq/quiver/client"
	clientadmin "github.com/quivermq/quiver/client/admin"
	"github.com/quivermq/quiver/core/kernel"
	"github.com/quivermq/quiver/core/protocol"
	"github.com/quivermq/quiver/internal/netlimit"
	"github.com/quivermq/quiver/modules/namesrv"
)

//go:embed console
var consoleFiles embed.FS

// consoleDevListen is where `mq dev` serves the console when
// console.listen is unset.
const consoleDevListen = "127.0.0.1:8080"

// consoleConfig is the console section.
type consoleConfig struct {
	// Listen is host:port of the console; empty serves none (mq dev:
	// consoleDevListen).
	Listen string `koanf:"listen" addr:"listen"`
	// Admin allows the console's actions (DLQ resend, offset reset).
	Admin bool `koanf:"admin"`
	// Auth is the login: empty (none), "acl" (an ACL account's access
	// and secret key, whose permissions then bound the console), or a
	// bcrypt hash of a password (mq console hash-password).
	Auth string `koanf:"auth"`
}

type consoleServer struct {
	namesrv string
	timeout time.Duration
	opts    *adminOpts
	allow   bool
	log     *slog.Logger
	// auth is console.auth; sessions the CSRF key and logins; loopback
	// whether the listener is on a loopback address (then only loopback
	// Host headers are served).
	auth     consoleAuth
	sessions *consoleSessions
	loopback bool

	// hist is the last hour of counters, sampled from the start
	// (console_history.go); samp is the sampler's own state and interval
	// its period.
	hist     *history
	samp     sampler
	interval time.Duration

	mu     sync.Mutex
	srv    *http.Server
	ln     net.Listener
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func newConsole(namesrv string, allow bool, opts *adminOpts, log *slog.Logger) *consoleServer {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if opts == nil {
		opts = &adminOpts{output: "json"}
	}
	return &consoleServer{namesrv: namesrv, timeout: 10 * time.Second, opts: opts, allow: allow, log: log.With("component", "console"), hist: newHistory(consoleSampleInterval), interval: consoleSampleInterval, sessions: newConsoleSessions()}
}

// consoleSampleInterval is how often the console samples the cluster.
const consoleSampleInterval = 10 * time.Second

// Start binds addr synchronously, then serves and, from now on whether or
// not the page is open, samples the cluster's counters every interval
// (console_history.go).
func (c *consoleServer) Start(ctx context.Context, addr string, interval time.Duration) error {
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("console: %w", err)
	}
	if ta, ok := ln.Addr().(*net.TCPAddr); ok && ta.IP.IsLoopback() {
		c.loopback = true
	} else if c.allow && c.auth.mode == consoleAuthNone {
		_ = ln.Close()
		return fmt.Errorf("console: admin rights on %s, which is not a loopback address, need a login (console.auth / --auth)", ln.Addr())
	}
	c.interval = interval
	c.hist.reset(interval)
	sctx, cancel := context.WithCancel(context.Background())
	// Bounded (docs/SECURITY.md): connections in all and per IP, header
	// and body sizes (a form; a test message's body at most
	// consoleMaxBody), slow and idle connections.
	lim := netlimit.DefaultHTTP()
	lim.MaxBodyBytes = consoleMaxBody
	srv := lim.Server(c.handler(), c.log)
	ln = lim.Listener(ln, "console", c.log)
	c.mu.Lock()
	c.srv, c.ln, c.cancel = srv, ln, cancel
	c.mu.Unlock()
	c.wg.Add(2)
	go func() {
		defer c.wg.Done()
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			c.log.Error("console server", "err", err)
		}
	}()
	go func() {
		defer c.wg.Done()
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			c.sample(sctx)
			select {
			case <-sctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	c.log.Info("console listening", "addr", ln.Addr().String(), "admin", c.allow, "auth", c.auth.mode)
	return nil
}

// Addr is the bound address.
func (c *consoleServer) Addr() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ln == nil {
		return ""
	}
	return c.ln.Addr().String()
}

// Stop shuts the server and the sampler down and waits for them.
func (c *consoleServer) Stop(ctx context.Context) error {
	c.mu.Lock()
	srv, cancel := c.srv, c.cancel
	c.mu.Unlock()
	if srv == nil {
		return nil
	}
	cancel()
	err := srv.Shutdown(ctx)
	c.wg.Wait()
	return err
}

// adm is a connection signing with the console's keys (--access-key).
func (c *consoleServer) adm(w io.Writer) *adm {
	return c.admWith(c.opts.accessKey, c.opts.secretKey)
}

// admWith is a connection signing with ak/sk (none when ak is empty).
func (c *consoleServer) admWith(ak, sk string) *adm {
	o := *c.opts
	o.accessKey, o.secretKey = ak, sk
	a := &adm{admin: newAdmin(c.namesrv, c.timeout), opts: &o, w: io.Discard}
	a.accessKey, a.secretKey = ak, sk
	return a
}

// admFor is the connection of a request: an ACL login signs with its
// account's keys.
func (c *consoleServer) admFor(r *http.Request) *adm {
	if l := loginOf(r.Context()); l != nil && l.ak != "" {
		return c.admWith(l.ak, l.sk)
	}
	return c.adm(io.Discard)
}

// api wraps a JSON endpoint: f's value is written as JSON, its error as
// {"error": …} with 502 (or 403 for refused actions).
func (c *consoleServer) api(f func(ctx context.Context, a *adm, r *http.Request) (any, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		a := c.admFor(r)
		defer a.Close()
		ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
		defer cancel()
		v, err := f(ctx, a, r)
		w.Header().Set("Content-Type", "application/json")
		if err != nil {
			code := http.StatusBadGateway
			switch {
			case errors.Is(err, errForbidden):
				code = http.StatusForbidden
			case errors.Is(err, errBadRequest):
				code = http.StatusBadRequest
			case errors.Is(err, netlimit.ErrTooLarge):
				code = http.StatusRequestEntityTooLarge
			}
			w.WriteHeader(code)
			_ = json.NewEncoder(w).Encode(map[string]string{"error": err.Error()})
			return
		}
		_ = json.NewEncoder(w).Encode(v)
	}
}

// A request's body is a form of at most consoleFormMaxBody, but for the
// test message's (consoleSendPath), whose body field may be a message of
// broker.max_message_size (4MiB), URL-encoded: consoleMaxBody.
const (
	consoleFormMaxBody = 64 << 10
	consoleMaxBody     = 16 << 20
	consoleSendPath    = "/api/messages/send"
)

// limitBodies bounds each request's body to what its route takes.
func limitBodies(next http.Handler) http.Handler {
	forms, send := netlimit.LimitBody(next, consoleFormMaxBody), netlimit.LimitBody(next, consoleMaxBody)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.URL.Path == consoleSendPath {
			send.ServeHTTP(w, r)
			return
		}
		forms.ServeHTTP(w, r)
	})
}

var (
	errForbidden  = errors.New("console is read-only (start it with --admin or console.admin: true)")
	errBadRequest = errors.New("bad request")
)

// formError is a request's unparsable form: 413 if too large, else 400.
func formError(err error) error {
	if errors.Is(err, netlimit.ErrTooLarge) {
		return fmt.Errorf("console: %w", err)
	}
	return badRequest("%v", err)
}

// badRequest is an error answered with 400.
func badRequest(format string, args ...any) error {
	return fmt.Errorf("%w: %s", errBadRequest, fmt.Sprintf(format, args...))
}

func (c *consoleServer) handler() http.Handler {
	mux := http.NewServeMux()
	static, _ := fs.Sub(consoleFiles, "console")
	files := http.FileServerFS(static)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		// A file of the page, or a route of the page (deep links).
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		name := strings.TrimPrefix(r.URL.Path, "/")
		if st, err := fs.Stat(static, name); name == "" || err != nil || st.IsDir() {
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			http.ServeFileFS(w, r, static, "index.html")
			return
		}
		files.ServeHTTP(w, r)
	})
	mux.HandleFunc("/api/", func(w http.ResponseWriter, r *http.Request) {
		writeJSONError(w, http.StatusNotFound, fmt.Sprintf("console: no API %s %s", r.Method, r.URL.Path))
	})
	mux.HandleFunc("GET /api/session", c.handleSession)
	mux.HandleFunc("POST /api/login", c.handleLogin)
	mux.HandleFunc("POST /api/logout", c.handleLogout)
	mux.HandleFunc("GET /api/info", c.api(func(ctx context.Context, a *adm, r *http.Request) (any, error) {
		return map[string]any{"namesrv": c.namesrv, "admin": c.allow}, nil
	}))
	mux.HandleFunc("GET /api/cluster", c.api(func(ctx context.Context, a *adm, r *http.Request) (any, error) {
		bs, err := a.brokers(ctx)
		if err != nil {
			return nil, err
		}
		type row struct {
			brokerInfo
			Runtime map[string]string `json:"runtime"`
		}
		out := []row{}
		for _, b := range bs {
			rt, _ := a.runtimeInfo(ctx, b.Addr)
			out = append(out, row{b, rt})
		}
		return out, nil
	}))
	c.apiRoutes(mux) // console_api.go
	mux.HandleFunc("GET /api/groups", c.api(func(ctx context.Context, a *adm, r *http.Request) (any, error) {
		return c.groups(ctx, a)
	}))
	mux.HandleFunc("GET /api/group", c.api(func(ctx context.Context, a *adm, r *http.Request) (any, error) {
		return a.groupStatusOf(ctx, r.URL.Query().Get("group"))
	}))
	mux.HandleFunc("GET /api/messages", c.api(func(ctx context.Context, a *adm, r *http.Request) (any, error) {
		q := r.URL.Query()
		if id := strings.TrimSpace(q.Get("id")); id != "" {
			return a.messagesByID(ctx, id, q.Get("topic")) // admin_message.go
		}
		topic := q.Get("topic")
		if topic == "" {
			return nil, errors.New("give an id, or a topic with a key or a time range")
		}
		now := time.Now()
		begin, err := parseAdminTime(orDefault(q.Get("begin"), "-1h"), now)
		if err != nil {
			return nil, err
		}
		end, err := parseAdminTime(orDefault(q.Get("end"), "now"), now)
		if err != nil {
			return nil, err
		}
		if end < begin {
			return nil, badRequest("the time range ends before it begins")
		}
		if key := q.Get("key"); key != "" {
			return a.queryMessages(ctx, topic, key, begin, end, 32)
		}
		ms, err := a.readMessages(ctx, topic, true, 0, begin, 1000)
		if err != nil {
			return nil, err
		}
		out := []messageView{}
		for _, m := range ms {
			if m.StoreTimestamp <= end {
				out = append(out, m)
			}
		}
		if q.Get("page") == "" {
			return out, nil
		}
		return paged(r, out)
	}))
	mux.HandleFunc("GET /api/dlq", c.api(func(ctx context.Context, a *adm, r *http.Request) (any, error) {
		group := r.URL.Query().Get("group")
		ms, err := a.readMessages(ctx, protocol.DLQTopic(group), false, 0, 0, 500)
		if err != nil && strings.Contains(err.Error(), "does not exist") {
			return []messageView{}, nil
		}
		if ms == nil {
			ms = []messageView{}
		}
		return ms, err
	}))
	mux.HandleFunc("POST /api/dlq/resend", c.action(func(ctx context.Context, a *adm, r *http.Request) (any, error) {
		group, id := strings.TrimSpace(r.FormValue("group")), strings.TrimSpace(r.FormValue("msgId"))
		if group == "" {
			return nil, badRequest("give a group")
		}
		if id == "" && r.FormValue("all") != "true" {
			return nil, badRequest("give msgId, or all=true to resend every dead letter")
		}
		return a.resendDLQData(ctx, group, id, r.FormValue("again") == "true")
	}))
	mux.HandleFunc("POST /api/offset/reset", c.action(func(ctx context.Context, a *adm, r *http.Request) (any, error) {
		ts, err := parseAdminTime(r.FormValue("timestamp"), time.Now())
		if err != nil {
			return nil, err
		}
		var out []queueOffset
		brokers, ok, err := a.route(ctx, r.FormValue("topic"))
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, fmt.Errorf("topic %s does not exist", r.FormValue("topic"))
		}
		lib, err := a.library()
		if err != nil {
			return nil, err
		}
		for _, bq := range brokers {
			offs, _, err := lib.ResetOffsetOn(ctx, bq.addr, r.FormValue("group"), r.FormValue("topic"), ts, true)
			if err != nil {
				return nil, codeErr(err)
			}
			for mq, off := range offs {
				out = append(out, queueOffset{Broker: mq.BrokerName, Queue: int(mq.QueueID), Offset: off})
			}
		}
		sort.Slice(out, func(i, j int) bool {
			if out[i].Broker != out[j].Broker {
				return out[i].Broker < out[j].Broker
			}
			return out[i].Queue < out[j].Queue
		})
		return out, nil
	}))
	mux.HandleFunc("GET /api/history", c.api(func(ctx context.Context, a *adm, r *http.Request) (any, error) {
		return c.historyView(r)
	}))
	mux.HandleFunc("GET /api/overview", c.api(func(ctx context.Context, a *adm, r *http.Request) (any, error) {
		return c.overview(), nil
	}))
	mux.HandleFunc("GET /api/topics/{topic}/groups", c.api(func(ctx context.Context, a *adm, r *http.Request) (any, error) {
		return c.topicGroups(ctx, a, r.PathValue("topic"))
	}))
	c.groupRoutes(mux)  // console_groups.go
	c.traceRoutes(mux)  // console_trace.go
	c.acl2Routes(mux)   // console_acl2.go
	c.mirrorRoutes(mux) // console_mirror.go
	return c.guard(limitBodies(mux))
}

type queueOffset struct {
	Broker string `json:"broker"`
	Queue  int    `json:"queue"`
	Offset int64  `json:"offset"`
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

type topicSummary struct {
	Topic    string       `json:"topic"`
	Messages int64        `json:"messages"`
	Queues   []queueStats `json:"queues"`
	// InTps and OutTps are messages written and consumed per second over
	// the last minute (null: not known yet, or the topic is not sampled).
	InTps  *float64 `json:"inTps"`
	OutTps *float64 `json:"outTps"`
}

func (c *consoleServer) topics(ctx context.Context, a *adm) ([]topicSummary, error) {
	lib, err := a.library()
	if err != nil {
		return nil, err
	}
	all, err := lib.Topics(ctx)
	if err != nil {
		return nil, err
	}
	bs, err := a.brokers(ctx)
	if err != nil {
		return nil, err
	}
	names := map[string]bool{}
	for _, b := range bs {
		names[b.Name], names[b.Cluster] = true, true
	}
	out := []topicSummary{}
	for _, t := range all {
		if isInternalTopic(t) || names[t] {
			continue
		}
		qs, err := a.topicStatus(ctx, t)
		if err != nil {
			continue // deleted meanwhile
		}
		s := topicSummary{Topic: t, Queues: qs}
		s.InTps, s.OutTps = c.hist.tps(kindTopic, t)
		for _, q := range qs {
			s.Messages += q.MaxOffset - q.MinOffset
		}
		out = append(out, s)
	}
	return out, nil
}

type groupSummary struct {
	Group   string `json:"group"`
	Lag     int64  `json:"lag"`
	Clients int    `json:"clients"`
	// ConsumeTps is the messages committed per second over the last
	// minute (null: not known yet, or the group is not sampled).
	ConsumeTps *float64 `json:"consumeTps"`
}

func (c *consoleServer) groups(ctx context.Context, a *adm) ([]groupSummary, error) {
	ms, err := a.masters(ctx)
	if err != nil {
		return nil, err
	}
	lib, err := a.library()
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for _, m := range ms {
		table, err := lib.SubscriptionGroups(ctx, m.Addr)
		if err != nil {
			return nil, codeErr(err)
		}
		for g := range table {
			if !isSystemGroup(g) {
				seen[g] = true
			}
		}
	}
	out := []groupSummary{}
	for _, g := range sortedKeys(seen) {
		st, err := a.groupStatusOf(ctx, g)
		if err != nil {
			return nil, err
		}
		rate, _ := c.hist.tps(kindGroup, g)
		out = append(out, groupSummary{Group: g, Lag: st.Lag, Clients: len(st.Clients), ConsumeTps: rate})
	}
	return out, nil
}

// resendDLQData resends a group's dead letters (one by id, or all) and
// returns what was resent.
func (a *adm) resendDLQData(ctx context.Context, group, msgID string, again bool) ([]clientadmin.ResentLetter, error) {
	brokers, ok, err := a.route(ctx, protocol.DLQTopic(group))
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("no dead letters for group %s", group)
	}
	lib, err := a.library()
	if err != nil {
		return nil, err
	}
	out := []clientadmin.ResentLetter{}
	for _, bq := range brokers {
		res, err := lib.ResendDLQ(ctx, bq.addr, clientadmin.ResendSpec{Group: group, MsgID: msgID, Again: again})
		var be *client.BrokerError
		switch {
		case errors.Is(err, clientadmin.ErrMessageNotFound):
			continue
		case errors.As(err, &be):
			return nil, fmt.Errorf("resend on %s: code %d %s", bq.name, be.Code, be.Remark)
		case err != nil:
			return nil, err
		}
		out = append(out, res.Resent...)
	}
	if msgID != "" && len(out) == 0 {
		return nil, fmt.Errorf("no dead letter %s for group %s", msgID, group)
	}
	return out, nil
}

// consoleCmd is `mq console`.
func consoleCmd() *cobra.Command {
	var ns, listen, auth string
	var allow bool
	o := &adminOpts{output: "json"}
	cmd := &cobra.Command{
		Use: "console", Short: "Serve the web console for a cluster", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ca, err := parseConsoleAuth(auth)
			if err != nil {
				return usageError{err}
			}
			c := newConsole(ns, allow, o, slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), nil)))
			c.auth = ca
			if err := c.Start(cmd.Context(), listen, consoleSampleInterval); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "console on http://%s (name server %s)\n", c.Addr(), ns)
			<-cmd.Context().Done()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			return c.Stop(ctx)
		},
	}
	cmd.Flags().StringVar(&ns, "namesrv", adminNamesrv(), "name server address (env QUIVER_NAMESRV)")
	cmd.Flags().StringVar(&listen, "listen", consoleDevListen, "address to serve on")
	cmd.Flags().BoolVar(&allow, "admin", false, "allow the console's actions: topic changes, sends, DLQ resend, offset reset, broker config and ACL edits (default read-only; on a non-loopback address only with --auth)")
	cmd.Flags().StringVar(&auth, "auth", "", `login: "acl" (an ACL account's keys, whose permissions bound the console) or a bcrypt password hash (mq console hash-password)`)
	cmd.AddCommand(consoleHashCmd())
	cmd.Flags().StringVar(&o.accessKey, "access-key", "", "ACL access key the console signs with")
	cmd.Flags().StringVar(&o.secretKey, "secret-key", "", "ACL secret key")
	return cmd
}

// consoleModule serves the console inside `mq dev`: console.listen
// (default consoleDevListen, loopback; a busy default only logs) with
// console.admin (default true in dev, where everything is local: the
// console answers loopback Host names only, and actions need same-origin
// requests with the session's CSRF token) and console.auth. Admin rights
// on a non-loopback console.listen need console.auth (the start fails).
var consoleModule = fx.Invoke(func(lc fx.Lifecycle, log *slog.Logger, p *kernel.Plan) error {
	planned, err := kernel.Setting[*consoleConfig](p, consoleSection.Key)
	if err != nil {
		return err
	}
	ns, err := kernel.Setting[*namesrv.Config](p, "namesrv")
	if err != nil {
		return err
	}
	cc := *planned // the plan's values stay as planned
	ca, err := parseConsoleAuth(cc.Auth)
	if err != nil {
		return err
	}
	soft := !p.Config.Exists("console.listen")
	if soft {
		cc.Listen = consoleDevListen
	}
	if cc.Listen == "" {
		return nil
	}
	c := newConsole(ns.Listen, cc.Admin, nil, log)
	c.auth = ca
	lc.Append(fx.Hook{
		OnStart: func(ctx context.Context) error {
			err := c.Start(ctx, cc.Listen, consoleSampleInterval)
			if err != nil && soft {
				log.Warn("console not served: default address busy (set console.listen)", "addr", cc.Listen, "err", err)
				return nil
			}
			return err
		},
		OnStop: c.Stop,
	})
	return nil
})
