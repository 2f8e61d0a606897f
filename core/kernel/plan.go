package kernel

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"time"

	"go.uber.org/fx"
	"go.uber.org/fx/fxevent"

	"github.com/quivermq/quiver/core/auth"
	"github.com/quivermq/quiver/core/config"
	"github.com/quivermq/quiver/core/filter"
	"github.com/quivermq/quiver/core/store"
	"github.com/quivermq/quiver/core/store/retention"
	"github.com/quivermq/quiver/core/transport"
)

// Section is a module's configuration section: its top-level key and the
// function that decodes it strictly and validates it (a module's
// NewConfigFrom).
type Section struct {
	Key    string
	Decode func(*config.Config) (any, error)
}

// Component is one module of a role and the section it owns (nil when it
// owns none).
type Component struct {
	Section *Section
	Module  fx.Option
}

// Plugins are the plugins a binary carries, one plain list per seam.
type Plugins struct {
	Storage   []store.Provider
	Transport []transport.Provider
	Filter    []filter.Provider
	Auth      []auth.Provider
}

// Registries are the four plugin registries.
type Registries struct {
	Storage   *StorageRegistry
	Transport *TransportRegistry
	Filter    *FilterRegistry
	Auth      *AuthRegistry
}

// Registries indexes the plugins by ID; two plugins of a seam with one ID
// is an error.
func (ps Plugins) Registries() (Registries, error) {
	var r Registries
	var err error
	if r.Storage, err = NewRegistry("storage engine", ps.Storage, store.Provider.ID); err != nil {
		return r, err
	}
	if r.Transport, err = NewRegistry("transport", ps.Transport, transport.Provider.ID); err != nil {
		return r, err
	}
	if r.Filter, err = NewRegistry("filter", ps.Filter, filter.Provider.ID); err != nil {
		return r, err
	}
	r.Auth, err = NewRegistry("auth plugin", ps.Auth, auth.Provider.ID)
	return r, err
}

// Spec is a role as a value: the plugins of the binary, the role's
// components in start order, the sections it decodes besides its
// components' (those of the other roles and the binary's own, so that one
// file serves every process) and the rules across sections (Check). The
// plan (NewPlan), --check-config, mq plugins and the configuration
// reference all read it.
type Spec struct {
	Plugins    Plugins
	Components []Component
	Sections   []Section
	Check      func(*Plan) []Problem
}

// AllSections are the spec's sections, each key once, sorted by key.
func (s Spec) AllSections() []Section {
	all := slices.Clone(s.Sections)
	for _, c := range s.Components {
		if c.Section != nil {
			all = append(all, *c.Section)
		}
	}
	slices.SortStableFunc(all, func(a, b Section) int { return strings.Compare(a.Key, b.Key) })
	return slices.CompactFunc(all, func(a, b Section) bool { return a.Key == b.Key })
}

// TopLevel lists the top-level keys a plan of the spec accepts: the
// kernel's, its sections' and the old spelling of each auth plugin's
// section (acl.*), sorted.
func (s Spec) TopLevel() []string {
	keys := slices.Clone(kernelSections)
	for _, a := range s.Plugins.Auth {
		keys = append(keys, a.ID())
	}
	for _, sec := range s.AllSections() {
		top, _, _ := strings.Cut(sec.Key, ".")
		keys = append(keys, top)
	}
	slices.Sort(keys)
	return slices.Compact(keys)
}

// StorageSettings are the engine-independent storage settings, decoded
// once: Dir is absolute, Flush checked, CleanHours parsed.
type StorageSettings struct {
	StorageConfig
	CleanHours []int
	// Engine and EngineConfig are the selected engine and its decoded,
	// validated section storage.<engine>.
	Engine       store.Provider
	EngineConfig any
	engines      []string // every registered engine (checkEngine)
}

// Plan is the configuration of a process, decoded and validated before
// anything is built: typed settings for the kernel, every plugin section
// (<seam>.<id>, decoded whether or not the plugin is enabled) and every
// module section. Modules take their settings from it (Setting), never
// from raw keys.
type Plan struct {
	Config   *config.Config
	Log      LogConfig
	Remoting RemotingConfig
	Storage  StorageSettings
	// Transports are the enabled transports, in the order of `transports`,
	// with their decoded sections.
	Transports       []transport.Provider
	TransportConfigs map[string]any
	// PropertyFilter is filter.property_filter; FilterConfigs the decoded
	// filter.<id> sections of every registered filter.
	PropertyFilter bool
	FilterConfigs  map[string]any
	// Auth are the enabled auth plugins (auth.<id>.enabled), sorted by ID.
	Auth []AuthSettings
	// Notices are one-line remarks about the configuration that are not
	// problems (keys read under their old spelling); the caller logs them.
	Notices []string
	// Spec is the role planned; Registries its plugins, indexed.
	Spec       Spec
	Registries Registries
	sections   map[string]any
}

// Options is the application of the plan: the plan itself, the kernel and
// the spec's components in order. Each start of a process plans anew
// (NewPlan) and builds its app from that plan.
func (p *Plan) Options() fx.Option {
	opts := []fx.Option{fx.Supply(p), Module,
		fx.WithLogger(func(log *slog.Logger) fxevent.Logger {
			l := &fxevent.SlogLogger{Logger: log.With("component", "fx")}
			l.UseLogLevel(slog.LevelDebug)
			// fx's failures are the caller's to report (mq prints one
			// line per problem); their chain is for debugging.
			l.UseErrorLevel(slog.LevelDebug)
			return l
		}),
		fx.StartTimeout(30 * time.Second), fx.StopTimeout(30 * time.Second)}
	for _, c := range p.Spec.Components {
		if c.Module != nil {
			opts = append(opts, c.Module)
		}
	}
	return fx.Options(opts...)
}

// AuthSettings are the settings of an enabled auth plugin, from its
// section auth.<id> (or its old spelling <id>.*, as acl.enabled).
type AuthSettings struct {
	Provider auth.Provider
	// Config is the plugin's section less the guard's keys, decoded into
	// its NewConfig() value and validated.
	Config any
	// Namesrv is auth.<id>.namesrv_enabled (NamesrvKey).
	Namesrv bool
}

// AuthSection is the section of the auth plugins: auth.<id>.enabled
// turns plugin <id> on, auth.<id>.namesrv_enabled makes name servers check
// with it too, and its other keys are the plugin's config. The section
// <id> at the top level (acl.enabled, acl.file) is the old spelling of
// auth.<id>, still read (with a notice).
const AuthSection = "auth"

// kernelSections are the top-level keys the kernel owns.
var kernelSections = []string{"log", "remoting", "storage", "transport", "transports", "filter", AuthSection}

// Setting returns the decoded section key of a module.
func Setting[T any](p *Plan, key string) (T, error) {
	var zero T
	v, ok := p.sections[key]
	if !ok {
		return zero, fmt.Errorf("kernel: no section %s in the plan (is it a section of the spec?)", key)
	}
	t, ok := v.(T)
	if !ok {
		return zero, fmt.Errorf("kernel: section %s is a %T, not a %T", key, v, zero)
	}
	return t, nil
}

// Problem is one thing wrong with the configuration: a config.KeyError
// (its fields mean the same) and the layer that set its key.
type Problem struct {
	// Key is the key or section at fault ("" for a problem of no key).
	Key string
	// Msg says what is wrong; for an unknown key, an optional hint.
	Msg     string
	Unknown bool
	// Subject says Msg goes on from Key as one sentence ("storage.pebble
	// is set but ..."); otherwise it follows "Key: ".
	Subject bool
	// Source is the layer that set Key: a file, an environment variable
	// or "--set" ("" for defaults).
	Source string
}

func (p Problem) String() string {
	s := p.Msg
	if p.Key != "" || p.Unknown {
		s = (&config.KeyError{Key: p.Key, Msg: p.Msg, Unknown: p.Unknown, Subject: p.Subject}).Error()
	}
	return s + sourceNote(p.Source)
}

// sourceNote says where a key was set: " (in file)", " (from --set)", " (from
// environment variable X)", or "" for defaults.
func sourceNote(src string) string {
	switch {
	case src == "":
		return ""
	case src == "--set":
		return " (from --set)"
	case strings.HasPrefix(src, config.EnvPrefix):
		return " (from environment variable " + src + ")"
	}
	return " (in " + src + ")"
}

// PlanError is every problem of a configuration, one per line.
type PlanError struct{ Problems []Problem }

func (e *PlanError) Error() string {
	lines := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		lines[i] = p.String()
	}
	return strings.Join(lines, "\n")
}

// planner collects problems while decoding.
type planner struct {
	cfg      *config.Config
	problems []Problem
	// aliases map a section read from a merged view (auth.acl) to its old
	// spelling (acl), whose keys' sources stand for it.
	aliases map[string]string
}

func (pl *planner) add(key, format string, args ...any) {
	pl.problems = append(pl.problems, Problem{Key: key, Msg: fmt.Sprintf(format, args...), Source: pl.source(key)})
}

func (pl *planner) unknown(key string, candidates []string) {
	p := Problem{Key: key, Unknown: true, Source: pl.source(key)}
	parent, last := "", key
	if i := strings.LastIndexByte(key, '.'); i >= 0 {
		parent, last = key[:i+1], key[i+1:]
	}
	if s := config.Suggest(last, candidates); s != "" {
		p.Msg = "did you mean " + parent + s + "?"
	}
	pl.problems = append(pl.problems, p)
}

// source prefers the most specific layer that set key or a key under it.
func (pl *planner) source(key string) string {
	if key == "" {
		return ""
	}
	best := ""
	for _, k := range pl.cfg.Keys() {
		if k != key && !strings.HasPrefix(k, key+".") {
			continue
		}
		s := pl.cfg.Source(k)
		if rank(s) > rank(best) {
			best = s
		}
	}
	if best == "" {
		best = pl.cfg.Source(key)
	}
	if best == "" {
		for canon, old := range pl.aliases {
			if rest, ok := strings.CutPrefix(key, canon); ok && (rest == "" || rest[0] == '.') {
				return pl.source(old + rest)
			}
		}
	}
	return best
}

func rank(src string) int {
	switch {
	case src == "":
		return 0
	case src == "--set":
		return 3
	case strings.HasPrefix(src, config.EnvPrefix):
		return 2
	}
	return 1
}

// absorb turns a decode or validation error into problems.
func (pl *planner) absorb(section string, err error, candidates func(key string) []string) {
	if err == nil {
		return
	}
	var ke *config.KeyError
	var errs config.Errors
	switch {
	case errors.As(err, &errs):
		for _, e := range errs {
			pl.absorb(section, e, candidates)
		}
	case errors.As(err, &ke):
		if ke.Unknown && ke.Msg == "" {
			var cands []string
			if candidates != nil {
				cands = candidates(ke.Key)
			}
			pl.unknown(ke.Key, cands)
			return
		}
		pl.problems = append(pl.problems, Problem{Key: ke.Key, Msg: ke.Msg, Unknown: ke.Unknown, Subject: ke.Subject, Source: pl.source(ke.Key)})
	default:
		msg := strings.TrimPrefix(err.Error(), "config: ")
		key := section
		if k, rest, ok := strings.Cut(msg, ": "); ok && !strings.ContainsAny(k, " \"") && (k == section || strings.HasPrefix(k, section+".")) {
			key, msg = k, rest
		}
		pl.add(key, "%s", msg)
	}
}

// structKeys lists the koanf keys of the struct v points to, one level
// deep, for suggestions.
func structKeys(v any) []string {
	t := reflect.TypeOf(v)
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil || t.Kind() != reflect.Struct {
		return nil
	}
	var out []string
	for i := 0; i < t.NumField(); i++ {
		k, _, _ := strings.Cut(t.Field(i).Tag.Get("koanf"), ",")
		if k != "" && k != "-" {
			out = append(out, k)
		}
	}
	return out
}

// keysOf returns a candidates function for the struct of a section: the
// keys of the struct at the unknown key's parent, and own at the top.
func keysOf(section string, v any, own ...string) func(string) []string {
	return func(key string) []string {
		rest := strings.TrimPrefix(key, section+".")
		t := reflect.TypeOf(v)
		parts := strings.Split(rest, ".")
		for _, p := range parts[:len(parts)-1] {
			for t.Kind() == reflect.Pointer {
				t = t.Elem()
			}
			if t.Kind() != reflect.Struct {
				return nil
			}
			found := false
			for i := 0; i < t.NumField(); i++ {
				if k, _, _ := strings.Cut(t.Field(i).Tag.Get("koanf"), ","); k == p {
					t, found = t.Field(i).Type, true
					break
				}
			}
			if !found {
				return nil
			}
		}
		keys := structKeys(reflect.New(t).Interface())
		if len(parts) == 1 { // own keys sit directly under section
			return append(keys, own...)
		}
		return keys
	}
}

// decodePlugin decodes section of view, less the seam's own keys, into
// a fresh config of a plugin (newCfg) strictly and, when validate is
// set, validates it. It returns the config and whether it differs from
// the defaults.
func (pl *planner) decodePlugin(view *config.Config, section string, newCfg func() any, validate bool, own []string) (any, bool) {
	decode := func(cfg *config.Config) (any, error) {
		c := newCfg()
		for _, k := range own {
			cfg = cfg.Without(section + "." + k)
		}
		if err := cfg.Decode(section, c); err != nil {
			return c, err
		}
		if validate {
			if v, ok := c.(interface{ Validate() error }); ok {
				return c, v.Validate()
			}
		}
		return c, nil
	}
	// A section with problems may still say what it set (decodeAll
	// decodes again without the unknown keys).
	c := pl.decodeAll(view, section, decode, own...)
	return c, !reflect.DeepEqual(c, newCfg())
}

// decodeAll runs decode on cfg and absorbs its problems (an unknown key
// directly under section may be one of own). When it fails on unknown
// keys it runs again without them, so that the values of the known keys
// are checked too and every problem of the section is reported at once.
func (pl *planner) decodeAll(cfg *config.Config, section string, decode func(*config.Config) (any, error), own ...string) any {
	v, err := decode(cfg)
	if err == nil {
		return v
	}
	var cands func(string) []string
	if v != nil {
		cands = keysOf(section, v, own...)
	}
	pl.absorb(section, err, cands)
	var unknown []string
	walkKeyErrors(err, func(ke *config.KeyError) {
		if ke.Unknown {
			unknown = append(unknown, ke.Key)
		}
	})
	if len(unknown) == 0 {
		return v
	}
	v2, err := decode(cfg.Without(unknown...))
	before := len(pl.problems)
	pl.absorb(section, err, nil) // the known keys' problems
	// A key inside a list entry (mirror.links[0].x) is no key Without
	// can drop: the second decode finds it again, reported above.
	kept := pl.problems[:before]
	for _, p := range pl.problems[before:] {
		if !p.Unknown || !slices.Contains(unknown, p.Key) {
			kept = append(kept, p)
		}
	}
	pl.problems = kept
	if v2 != nil {
		v = v2
	}
	return v
}

// walkKeyErrors calls f for each *config.KeyError in err's tree.
func walkKeyErrors(err error, f func(*config.KeyError)) {
	if err == nil {
		return
	}
	if ke, ok := err.(*config.KeyError); ok { //nolint:errorlint // walks the tree itself, collecting every KeyError
		f(ke)
		return
	}
	if m, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range m.Unwrap() {
			walkKeyErrors(e, f)
		}
		return
	}
	walkKeyErrors(errors.Unwrap(err), f)
}

// childSections lists the sub-keys of section that are set (their first
// path element).
func (pl *planner) children(section string) []string {
	seen := map[string]bool{}
	for _, k := range pl.cfg.Keys() {
		if rest, ok := strings.CutPrefix(k, section+"."); ok {
			first, _, _ := strings.Cut(rest, ".")
			seen[first] = true
		}
	}
	out := make([]string, 0, len(seen))
	for k := range seen {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// NewPlan decodes and validates the whole configuration of the role spec
// describes, before anything is built: log, remoting, storage (shared
// keys and storage.<engine> of every registered engine), transports and
// transport.<id> of every registered transport, filter and filter.<id>,
// the auth plugins' sections (auth.<id>, or the old spelling <id>.*, as
// acl.enabled), every section of the spec, the top-level keys
// (Spec.TopLevel) and the spec's Check. A plugin's section is decoded
// strictly whether or not the plugin is enabled; one of a disabled
// plugin that differs from its defaults is refused (its keys would do
// nothing). Every problem is reported at once in a *PlanError, each with
// its key and the layer that set it.
func NewPlan(cfg *config.Config, spec Spec) (*Plan, error) {
	regs, err := spec.Plugins.Registries()
	if err != nil {
		return nil, err
	}
	pl := &planner{cfg: cfg}
	p := &Plan{Config: cfg, Spec: spec, Registries: regs, sections: map[string]any{}}
	p.Log = pl.planLog()
	rc, err := NewRemotingConfig(cfg)
	pl.absorb("remoting", err, keysOf("remoting", &rc))
	p.Remoting = rc

	pl.planStorage(p, regs.Storage, true)
	pl.planTransports(p, regs.Transport)
	pl.planFilters(p, regs.Filter)
	pl.planAuth(p, regs.Auth)
	for _, s := range spec.AllSections() {
		p.sections[s.Key] = pl.decodeAll(pl.cfg, s.Key, s.Decode)
	}
	pl.checkTopLevel(spec.TopLevel())
	sort.SliceStable(pl.problems, func(i, j int) bool { return pl.problems[i].Key < pl.problems[j].Key })
	if spec.Check != nil { // the rules across sections, after the sections' own problems
		pl.problems = append(pl.problems, spec.Check(p)...)
	}
	if len(pl.problems) > 0 {
		return p, &PlanError{Problems: pl.problems}
	}
	return p, nil
}

// planLog decodes and checks the log section.
func (pl *planner) planLog() LogConfig {
	lc := LogConfig{Level: "info", Format: "text"}
	if err := pl.cfg.Decode("log", &lc); err != nil {
		pl.absorb("log", err, keysOf("log", &lc))
	}
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(lc.Level)); err != nil {
		pl.add("log.level", "%q is none of debug, info, warn, error", lc.Level)
	}
	if lc.Format != "text" && lc.Format != "json" {
		pl.add("log.format", "%q is neither text nor json", lc.Format)
	}
	return lc
}

// checkTopLevel refuses top-level keys outside known, each with a close
// match or the known keys, and the layer that set it.
func (pl *planner) checkTopLevel(known []string) {
	for _, top := range pl.cfg.TopLevel() {
		if slices.Contains(known, top) {
			continue
		}
		msg := "unknown section " + top
		if s := config.Suggest(top, known); s != "" {
			msg += "; did you mean " + s + "?"
		} else {
			msg += " (known: " + strings.Join(known, ", ") + ")"
		}
		pl.problems = append(pl.problems, Problem{Msg: msg, Source: pl.source(top)})
	}
}

// planStorage decodes the storage section; with others set, the sections
// of the engines not selected are refused when they differ from their
// defaults.
func (pl *planner) planStorage(p *Plan, reg *StorageRegistry, others bool) {
	cfg := pl.cfg
	sc := DefaultStorageConfig()
	shared := map[string]any{}
	engines := reg.IDs()
	for _, k := range pl.children("storage") {
		if slices.Contains(storageSharedKeys, k) {
			shared[k] = cfg.Get("storage." + k)
		}
	}
	if err := config.FromMap(map[string]any{"storage": shared}).Decode("storage", &sc); err != nil {
		pl.absorb("storage", err, nil)
	}
	if sc.DiskMaxUsedRatio < 0 || sc.DiskMaxUsedRatio > 1 {
		pl.add("storage.disk_max_used_ratio", "%v is outside 0..1", sc.DiskMaxUsedRatio)
	}
	hours, err := retention.ParseHours(sc.CleanAt)
	if err != nil {
		pl.add("storage.clean_at", "%v", strings.TrimPrefix(err.Error(), "retention: "))
	}
	if sc.Retention < 0 {
		pl.add("storage.retention", "%s must not be negative", pl.cfg.String("storage.retention"))
	}
	if sc.FlushInterval <= 0 {
		pl.add("storage.flush_interval", "%s must be positive", sc.FlushInterval)
	}
	if mode := store.FlushMode(sc.Flush); mode != store.FlushAsync && mode != store.FlushSync {
		pl.add("storage.flush", "%q is neither async nor sync", sc.Flush)
	}
	if sc.MaxMessageSize < 1 {
		pl.add("storage.max_message_size", "%d must be positive", sc.MaxMessageSize)
	}
	if sc.Dir == "" {
		pl.add("storage.dir", "must be set")
	} else if dir, err := filepath.Abs(sc.Dir); err != nil {
		pl.add("storage.dir", "%v", err)
	} else {
		sc.Dir = dir
	}
	p.Storage = StorageSettings{StorageConfig: sc, CleanHours: hours, engines: engines}
	var off func(id string) string
	if others {
		off = func(id string) string {
			return fmt.Sprintf("is set but storage.engine is %s: its keys do nothing (remove them, or set storage.engine: %s)", sc.Engine, id)
		}
	}
	configs := planSeam(pl, "storage", reg, seamRule{selected: func(id string) bool { return id == sc.Engine }, off: off, scalars: storageSharedKeys})
	if len(engines) == 0 {
		return // a binary without storage (a name server)
	}
	if prov, ok := pick(pl, "storage.engine", reg, sc.Engine); ok {
		p.Storage.Engine, p.Storage.EngineConfig = prov, configs[sc.Engine]
	}
}

// seamRule is how a seam selects its plugins: selected says whether
// plugin id is in use (its section is validated and kept); off, when
// set, words the problem of a section of a plugin not in use that
// differs from its defaults (its keys would do nothing); scalars are the
// seam's keys beside the plugins' sections; own are the keys of every
// plugin's section that the seam reads, not the plugin
// (auth.<id>.enabled). section, when set, says where plugin id's section
// is read: its key as the user spelled it and the configuration holding
// it (default <prefix>.<id> of the configuration); ok false skips id.
type seamRule struct {
	selected func(id string) bool
	off      func(id string) string
	scalars  []string
	own      []string
	section  func(id string) (key string, view *config.Config, ok bool)
}

// planSeam checks the keys under prefix (the rule's scalars and one
// section per registered plugin) and decodes the section of every plugin
// strictly, selected or not. It returns the sections of the selected
// plugins, by ID.
func planSeam[T interface{ NewConfig() any }](pl *planner, prefix string, reg *Registry[T], rule seamRule) map[string]any {
	ids := reg.IDs()
	if pl.cfg.Exists(prefix) && len(pl.children(prefix)) == 0 {
		sub := append(slices.Clone(rule.own), "<key>")[0] // auth.<id>.enabled, transport.<id>.<key>
		pl.add(prefix, "must be a section, one key per %s (%s.<id>.%s; registered: %s)", reg.kind, prefix, sub, cmp.Or(strings.Join(ids, ", "), "none"))
	}
	for _, k := range pl.children(prefix) {
		if !slices.Contains(rule.scalars, k) && !slices.Contains(ids, k) {
			pl.unknown(prefix+"."+k, append(slices.Clone(rule.scalars), ids...))
		}
	}
	out := map[string]any{}
	for _, id := range ids {
		key, view, ok := prefix+"."+id, pl.cfg, true
		if rule.section != nil {
			key, view, ok = rule.section(id)
		}
		if !ok {
			continue
		}
		prov, _ := reg.Get(id)
		sel := rule.selected(id)
		c, changed := pl.decodePlugin(view, key, prov.NewConfig, sel, rule.own)
		switch {
		case sel:
			out[id] = c
		case changed && rule.off != nil:
			pl.problems = append(pl.problems, Problem{Key: key, Msg: rule.off(id), Subject: true, Source: pl.source(key)})
		}
	}
	return out
}

// pick returns the plugin id of reg, which key names; an unknown id is a
// problem of key naming the registered plugins and a close match.
func pick[T any](pl *planner, key string, reg *Registry[T], id string) (T, bool) {
	prov, err := reg.Get(id)
	if err != nil {
		msg := err.Error()
		if s := config.Suggest(id, reg.IDs()); s != "" {
			msg += "; did you mean " + s + "?"
		}
		pl.add(key, "%s", msg)
		return prov, false
	}
	return prov, true
}

func (pl *planner) planTransports(p *Plan, reg *TransportRegistry) {
	ids := []string{"tcp"}
	if pl.cfg.Exists("transports") {
		ids = pl.cfg.Strings("transports")
	}
	seen := map[string]bool{}
	for _, id := range ids {
		if seen[id] {
			pl.add("transports", "%q is listed twice", id)
			continue
		}
		seen[id] = true
		if prov, ok := pick(pl, "transports", reg, id); ok {
			p.Transports = append(p.Transports, prov)
		}
	}
	p.TransportConfigs = planSeam(pl, "transport", reg, seamRule{selected: func(id string) bool { return seen[id] },
		off: func(id string) string {
			return fmt.Sprintf("is set but %s is not enabled: its keys do nothing (add %s to transports, or remove them)", strings.ToUpper(id), id)
		}})
}

func (pl *planner) planFilters(p *Plan, reg *FilterRegistry) {
	p.PropertyFilter = true
	if pl.cfg.Exists("filter.property_filter") {
		sec := struct {
			PropertyFilter bool `koanf:"property_filter"`
		}{true}
		if err := config.FromMap(map[string]any{"filter": map[string]any{"property_filter": pl.cfg.Get("filter.property_filter")}}).Decode("filter", &sec); err != nil {
			pl.absorb("filter", err, nil)
		}
		p.PropertyFilter = sec.PropertyFilter
	}
	p.FilterConfigs = planSeam(pl, "filter", reg, seamRule{selected: func(string) bool { return true }, scalars: []string{"property_filter"}})
}

// planAuth plans the auth seam: the section of plugin <id> is
// auth.<id>, or its old spelling <id>.* read as auth.<id>.* (with a
// notice; one key set in both spellings is a problem naming both);
// auth.<id>.enabled selects the plugin and auth.<id>.namesrv_enabled
// makes name servers check with it too. The enabled plugins go to
// p.Auth, sorted by ID.
func (pl *planner) planAuth(p *Plan, reg *AuthRegistry) {
	type authSec struct {
		key              string
		view             *config.Config
		enabled, namesrv bool
	}
	secs := map[string]authSec{}
	for _, id := range reg.IDs() {
		if key, view, ok := pl.authSection(p, id); ok {
			secs[id] = authSec{key, view, pl.boolKey(view, key+".enabled"), pl.boolKey(view, key+"."+NamesrvKey)}
		}
	}
	configs := planSeam(pl, AuthSection, reg, seamRule{own: []string{"enabled", NamesrvKey},
		selected: func(id string) bool { return secs[id].enabled },
		section:  func(id string) (string, *config.Config, bool) { s, ok := secs[id]; return s.key, s.view, ok },
		off: func(id string) string {
			return fmt.Sprintf("is set but %[1]s.enabled is false: its keys do nothing (set %[1]s.enabled: true, or remove them)", secs[id].key)
		}})
	for _, id := range reg.IDs() {
		if c, ok := configs[id]; ok {
			prov, _ := reg.Get(id)
			p.Auth = append(p.Auth, AuthSettings{Provider: prov, Config: c, Namesrv: secs[id].namesrv})
		}
	}
}

// boolKey reads key of view as a boolean, as environment strings spell
// them (true, 1, yes, on; unset is false).
func (pl *planner) boolKey(view *config.Config, key string) bool {
	switch v := strings.ToLower(view.String(key)); {
	case truthy(v):
		return true
	case v != "false" && v != "0" && v != "no" && v != "off" && v != "":
		pl.add(key, "%q is not a boolean (true or false)", view.String(key))
	}
	return false
}

// authSection says where the section of auth plugin id is read: the
// section's name as the user spelled it (auth.acl, or acl when only the
// old spelling is used, so that problems name the keys as written) and
// the configuration to read it from (a merged view when both spellings
// are used for different keys). ok is false when the plugin has no
// section, or when one key is set in both spellings (a problem).
func (pl *planner) authSection(p *Plan, id string) (section string, view *config.Config, ok bool) {
	canon := AuthSection + "." + id
	var old []string
	if !slices.Contains(kernelSections, id) && pl.cfg.Exists(id) {
		for _, k := range pl.cfg.Keys() {
			if k == id || strings.HasPrefix(k, id+".") {
				old = append(old, k)
			}
		}
	}
	if len(old) == 0 {
		return canon, pl.cfg, pl.cfg.Exists(canon)
	}
	both := false
	renamed := make([]string, len(old))
	for i, k := range old {
		renamed[i] = AuthSection + "." + k
		if pl.cfg.Exists(renamed[i]) {
			pl.problems = append(pl.problems, Problem{Key: renamed[i], Subject: true, Source: pl.source(renamed[i]),
				Msg: fmt.Sprintf("and %s%s are both set: %s.* is the old spelling of %s.*; keep one", k, sourceNote(pl.source(k)), id, canon)})
			both = true
		}
	}
	if both {
		return "", nil, false
	}
	p.Notices = append(p.Notices, fmt.Sprintf("config: %s read as %s (%s.* is the old spelling of %s.*)",
		strings.Join(old, ", "), strings.Join(renamed, ", "), id, canon))
	if !pl.cfg.Exists(canon) {
		return id, pl.cfg, true
	}
	view = pl.cfg.Without(id)
	for i, k := range old {
		view.Set(renamed[i], pl.cfg.Get(k))
	}
	if pl.aliases == nil {
		pl.aliases = map[string]string{}
	}
	pl.aliases[canon] = id
	return canon, view, true
}

// Section returns the decoded section key (nil when the plan has none).
func (p *Plan) Section(key string) any { return p.sections[key] }

// AddrKey names the key whose setting (or default) is the address addr
// (broker.listen for 127.0.0.1:10911), "" when none is: a start-up error
// about an address can then say which key to change.
func (p *Plan) AddrKey(addr string) string {
	if p == nil {
		return ""
	}
	keys := make([]string, 0, len(p.sections))
	for k := range p.sections {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var found string
	visit := func(key, val string) bool {
		if sameAddr(val, addr) {
			found = key
			return true
		}
		return false
	}
	for _, k := range keys {
		if walkStrings(k, reflect.ValueOf(p.sections[k]), visit) {
			return found
		}
	}
	for _, k := range p.Config.Keys() {
		if visit(k, p.Config.String(k)) {
			return found
		}
	}
	return ""
}

func walkStrings(key string, v reflect.Value, visit func(key, val string) bool) bool {
	for v.Kind() == reflect.Pointer || v.Kind() == reflect.Interface {
		if v.IsNil() {
			return false
		}
		v = v.Elem()
	}
	switch v.Kind() {
	case reflect.String:
		return visit(key, v.String())
	case reflect.Struct:
		t := v.Type()
		for i := 0; i < t.NumField(); i++ {
			name, _, _ := strings.Cut(t.Field(i).Tag.Get("koanf"), ",")
			if name == "" || name == "-" || !t.Field(i).IsExported() {
				continue
			}
			if walkStrings(key+"."+name, v.Field(i), visit) {
				return true
			}
		}
	}
	return false
}

func sameAddr(a, b string) bool {
	if a == "" || b == "" {
		return false
	}
	if a == b {
		return true
	}
	ha, pa, err1 := net.SplitHostPort(a)
	hb, pb, err2 := net.SplitHostPort(b)
	if err1 != nil || err2 != nil || pa != pb || pa == "0" {
		return false
	}
	norm := func(h string) string {
		switch h {
		case "", "0.0.0.0", "::":
			return "*"
		case "localhost", "::1":
			return "127.0.0.1"
		}
		return h
	}
	na, nb := norm(ha), norm(hb)
	return na == nb || na == "*" || nb == "*"
}
