// Package config loads Quiver's layered configuration with koanf: struct
// defaults, then a YAML file, then QUIVER_ environment variables (with __
// between levels), then --set key=value flags, later layers winning. An
// environment or --set value that starts with [ or { is a YAML flow list
// or map, as it would be in the file.
// Sections are decoded strictly: an unknown key is an error naming its path.
package config

import (
	"errors"
	"fmt"
	"math"
	"os"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/go-viper/mapstructure/v2"
	"github.com/knadh/koanf/parsers/yaml"
	"github.com/knadh/koanf/providers/confmap"
	"github.com/knadh/koanf/providers/file"
	"github.com/knadh/koanf/v2"
)

// EnvPrefix is the environment variable prefix.
const EnvPrefix = "QUIVER_"

// Config is the merged configuration.
type Config struct {
	k *koanf.Koanf
	// src maps each leaf key to the layer that set it last: the file's
	// path, the environment variable's name, or "--set".
	src map[string]string
}

// Options say where configuration comes from.
type Options struct {
	// File is a YAML file; empty means none.
	File string
	// Env is the environment, as os.Environ returns it; nil means none.
	Env []string
	// Sets are key=value overrides from the command line, in order.
	Sets []string
	// Defaults are applied first (flat "a.b" keys or nested maps).
	Defaults map[string]any
	// EnvKeep, when set, says which environment keys (already mapped to
	// "a.b" form) are configuration; the others are ignored, so that
	// QUIVER_ variables meant for tools (QUIVER_NAMESRV for mq admin) do
	// not break servers.
	EnvKeep func(key string) bool
}

// Load merges the layers.
func Load(o Options) (*Config, error) {
	k := koanf.New(".")
	src := map[string]string{}
	if len(o.Defaults) > 0 {
		if err := k.Load(confmap.Provider(o.Defaults, "."), nil); err != nil {
			return nil, fmt.Errorf("config: defaults: %w", err)
		}
	}
	if o.File != "" {
		fk := koanf.New(".")
		if err := fk.Load(file.Provider(o.File), yaml.Parser()); err != nil {
			return nil, fmt.Errorf("config: load %s: %w", o.File, err)
		}
		for _, key := range fk.Keys() {
			src[key] = o.File
		}
		if err := k.Merge(fk); err != nil {
			return nil, fmt.Errorf("config: load %s: %w", o.File, err)
		}
	}
	env := map[string]any{}
	envNames := map[string]string{}
	for _, kv := range o.Env {
		name, val, ok := strings.Cut(kv, "=")
		if !ok || !strings.HasPrefix(name, EnvPrefix) {
			continue
		}
		key := strings.ToLower(strings.TrimPrefix(name, EnvPrefix))
		key = strings.ReplaceAll(key, "__", ".")
		if key == "" || (o.EnvKeep != nil && !o.EnvKeep(key)) {
			continue
		}
		v, err := textValue(val)
		if err != nil {
			return nil, fmt.Errorf("config: %s (%s): %w", name, key, err)
		}
		env[key] = v
		envNames[key] = name
	}
	if len(env) > 0 {
		if err := k.Load(confmap.Provider(env, "."), nil); err != nil {
			return nil, fmt.Errorf("config: environment: %w", err)
		}
		for key, name := range envNames {
			src[key] = name
		}
	}
	for _, s := range o.Sets {
		key, val, ok := strings.Cut(s, "=")
		key = strings.TrimSpace(key)
		if !ok || key == "" {
			return nil, fmt.Errorf("config: --set %q: want key=value", s)
		}
		v, err := textValue(val)
		if err != nil {
			return nil, fmt.Errorf("config: --set %s: %w", key, err)
		}
		if err := k.Load(confmap.Provider(map[string]any{key: v}, "."), nil); err != nil {
			return nil, fmt.Errorf("config: --set %q: %w", s, err)
		}
		src[key] = "--set"
	}
	return &Config{k: k, src: src}, nil
}

// FromMap builds a Config from nested or flat values (tests, embedding).
func FromMap(m map[string]any) *Config {
	k := koanf.New(".")
	_ = k.Load(confmap.Provider(m, "."), nil)
	return &Config{k: k, src: map[string]string{}}
}

// Source names the layer that set key (a leaf, or a section: then the
// layer of its first key that has one): the file's path, the environment
// variable's name or "--set". It is "" for defaults and keys set by code.
func (c *Config) Source(key string) string {
	if s, ok := c.src[key]; ok {
		return s
	}
	var under []string
	for k := range c.src {
		if strings.HasPrefix(k, key+".") {
			under = append(under, k)
		}
	}
	if len(under) > 0 {
		sort.Strings(under)
		return c.src[under[0]]
	}
	// A key inside a value set as a whole (a map given by --set).
	for p := key; ; {
		i := strings.LastIndexByte(p, '.')
		if i < 0 {
			return ""
		}
		p = p[:i]
		if s, ok := c.src[p]; ok {
			return s
		}
	}
}

// Without returns a copy of c without keys (and whatever is under them).
func (c *Config) Without(keys ...string) *Config {
	k := c.k.Copy()
	for _, key := range keys {
		k.Delete(key)
	}
	return &Config{k: k, src: c.src}
}

// Exists reports whether path is set.
func (c *Config) Exists(path string) bool { return c.k.Exists(path) }

// Get returns the raw value at path (nil when unset).
func (c *Config) Get(path string) any { return c.k.Get(path) }

// String returns the string at path.
func (c *Config) String(path string) string { return c.k.String(path) }

// Strings returns the list at path; a string value is split on , and ;.
func (c *Config) Strings(path string) []string {
	v := c.k.Get(path)
	switch t := v.(type) {
	case nil:
		return nil
	case string:
		return splitList(t)
	case []any:
		out := make([]string, 0, len(t))
		for _, e := range t {
			out = append(out, fmt.Sprint(e))
		}
		return out
	case []string:
		return t
	default:
		return []string{fmt.Sprint(t)}
	}
}

// Set overrides one key (used by commands to apply their own defaults).
func (c *Config) Set(path string, v any) { _ = c.k.Set(path, v) }

// Keys lists every leaf key that is set.
func (c *Config) Keys() []string { return c.k.Keys() }

// TopLevel lists the top-level keys that are set, sorted.
func (c *Config) TopLevel() []string {
	seen := map[string]bool{}
	for _, k := range c.k.Keys() {
		top, _, _ := strings.Cut(k, ".")
		seen[top] = true
	}
	out := make([]string, 0, len(seen))
	for k := range seen {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Decode decodes the section at path into out (a pointer to a struct that
// already holds defaults), strictly: unknown keys are errors that name the
// full key path. An absent section leaves out unchanged. Fields tagged
// addr:"dial" or addr:"listen" are then checked as addresses (AddrTag);
// their problems come back as *AddrErrors with out filled.
func (c *Config) Decode(path string, out any) error {
	if path != "" && !c.k.Exists(path) {
		return nil
	}
	var md mapstructure.Metadata
	dc := &mapstructure.DecoderConfig{
		TagName:          "koanf",
		ErrorUnused:      true,
		WeaklyTypedInput: true,
		Metadata:         &md,
		DecodeHook: mapstructure.ComposeDecodeHookFunc(
			durationHook,
			mapstructure.TextUnmarshallerHookFunc(),
			stringToSliceHook,
		),
	}
	if err := c.k.UnmarshalWithConf(path, out, koanf.UnmarshalConf{Tag: "koanf", DecoderConfig: dc}); err != nil {
		return prefixErr(path, err)
	}
	var errs Errors
	checkAddrFields(path, reflect.ValueOf(out), &errs)
	if len(errs) > 0 {
		return fmt.Errorf("config: %w", &AddrErrors{errs})
	}
	return nil
}

// prefixErr turns mapstructure's errors, which name keys relative to the
// section ('sub' has invalid keys: y), into Errors that name full key paths
// (unknown key storage.sub.y).
func prefixErr(path string, err error) error {
	var errs Errors
	collectDecodeErrs(path, err, &errs)
	if len(errs) == 0 {
		return fmt.Errorf("config: %s: %w", path, err)
	}
	return fmt.Errorf("config: %w", errs)
}

func collectDecodeErrs(path string, err error, errs *Errors) {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range j.Unwrap() {
			collectDecodeErrs(path, e, errs)
		}
		return
	}
	de, ok := err.(*mapstructure.DecodeError) //nolint:errorlint // walks the tree itself (Unwrap below), one node at a time
	if !ok {
		if u := errors.Unwrap(err); u != nil {
			// fmt.Errorf("decoding failed ...: %w", joined)
			collectDecodeErrs(path, u, errs)
			return
		}
		*errs = append(*errs, keyErr(path, err))
		return
	}
	key := joinKey(path, de.Name())
	inner := de.Unwrap()
	if keys, ok := strings.CutPrefix(inner.Error(), "has invalid keys: "); ok {
		for _, k := range strings.Split(keys, ", ") {
			*errs = append(*errs, &KeyError{Key: joinKey(key, k), Unknown: true})
		}
		return
	}
	*errs = append(*errs, keyErr(key, inner))
}

func keyErr(key string, err error) error {
	msg := strings.TrimPrefix(err.Error(), "config: ")
	if key == "" {
		return errors.New(msg)
	}
	return &KeyError{Key: key, Msg: msg}
}

func joinKey(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "":
		return a
	}
	return a + "." + b
}

var durationType = reflect.TypeOf(time.Duration(0))

// durationHook decodes "500ms"-style strings into time.Duration with an
// error that shows the value and an example (time's own message does
// not say what a duration looks like).
func durationHook(from, to reflect.Type, data any) (any, error) {
	if to != durationType || from.Kind() != reflect.String {
		return data, nil
	}
	s := strings.TrimSpace(data.(string))
	d, err := time.ParseDuration(s)
	if err != nil {
		return nil, fmt.Errorf("%q is not a duration (e.g. 500ms)", data)
	}
	return d, nil
}

func stringToSliceHook(from, to reflect.Type, data any) (any, error) {
	if from.Kind() != reflect.String || to.Kind() != reflect.Slice {
		return data, nil
	}
	if to.Elem().Kind() == reflect.Uint8 {
		return data, nil
	}
	return splitList(data.(string)), nil
}

func splitList(s string) []string {
	if strings.TrimSpace(s) == "" {
		return []string{}
	}
	f := strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ';' })
	out := f[:0]
	for _, e := range f {
		if e = strings.TrimSpace(e); e != "" {
			out = append(out, e)
		}
	}
	return out
}

// Errors collects validation problems, each with its key path.
type Errors []error

func (e Errors) Error() string {
	parts := make([]string, len(e))
	for i, err := range e {
		parts[i] = err.Error()
	}
	return strings.Join(parts, "; ")
}

// Add records a problem at key.
func (e *Errors) Add(key, format string, args ...any) {
	*e = append(*e, &KeyError{Key: key, Msg: fmt.Sprintf(format, args...)})
}

// Unwrap returns the problems (errors.As finds a *KeyError among them).
func (e Errors) Unwrap() []error { return e }

// KeyError is a problem with one key (or section): "broker.listen: must
// be set".
type KeyError struct {
	Key string
	Msg string
	// Unknown says the key is not one the section has ("unknown key
	// broker.lissten"); Msg may then hold a hint.
	Unknown bool
	// Subject says Msg goes on from Key as the rest of one sentence
	// ("broker.namesrv is empty: ..."); otherwise it follows "Key: ".
	Subject bool
}

func (e *KeyError) Error() string {
	switch {
	case e.Unknown && e.Msg != "":
		return "unknown key " + e.Key + "; " + e.Msg
	case e.Unknown:
		return "unknown key " + e.Key
	case e.Subject:
		return e.Key + " " + e.Msg
	}
	return e.Key + ": " + e.Msg
}

// Suggest returns the candidate closest to word when it is close enough
// to be a likely typo (edit distance at most 2, or a third of its length
// up to 3; 1 for words of three letters or fewer), or "".
func Suggest(word string, candidates []string) string {
	best, bestD := "", 0
	for _, c := range candidates {
		d := editDistance(word, c)
		if best == "" || d < bestD || (d == bestD && c < best) {
			best, bestD = c, d
		}
	}
	limit := min(3, max(2, len(word)/3))
	if len(word) <= 3 {
		limit = 1
	}
	if best == "" || bestD > limit || bestD == 0 {
		return ""
	}
	return best
}

func editDistance(a, b string) int {
	// Optimal string alignment: insertions, deletions, substitutions and
	// adjacent transpositions (lsiten) cost one each.
	d := make([][]int, len(a)+1)
	for i := range d {
		d[i] = make([]int, len(b)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(a)][len(b)]
}

// Err returns nil when there are no problems.
func (e Errors) Err() error {
	if len(e) == 0 {
		return nil
	}
	return e
}

// ByteSize is a size in bytes that decodes from numbers or strings such as
// "1GiB", "64MiB", "512KB".
type ByteSize int64

// UnmarshalText implements encoding.TextUnmarshaler.
func (b *ByteSize) UnmarshalText(t []byte) error {
	n, err := ParseByteSize(string(t))
	if err != nil {
		return err
	}
	*b = ByteSize(n)
	return nil
}

// String formats b with a binary unit when exact.
func (b ByteSize) String() string {
	units := []struct {
		n int64
		s string
	}{{1 << 40, "TiB"}, {1 << 30, "GiB"}, {1 << 20, "MiB"}, {1 << 10, "KiB"}}
	for _, u := range units {
		if int64(b) >= u.n && int64(b)%u.n == 0 {
			return strconv.FormatInt(int64(b)/u.n, 10) + u.s
		}
	}
	return strconv.FormatInt(int64(b), 10)
}

var errSize = errors.New("config: bad size")

// ParseByteSize parses "1024", "4KiB", "4KB", "16MiB", "1GiB", "1G".
func ParseByteSize(s string) (int64, error) {
	s = strings.TrimSpace(s)
	i := len(s)
	for i > 0 && (s[i-1] < '0' || s[i-1] > '9') {
		i--
	}
	num, unit := s[:i], strings.ToUpper(strings.TrimSpace(s[i:]))
	n, err := strconv.ParseInt(strings.TrimSpace(num), 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%w %q", errSize, s)
	}
	mult := map[string]int64{"": 1, "B": 1, "K": 1 << 10, "KB": 1 << 10, "KIB": 1 << 10, "M": 1 << 20, "MB": 1 << 20, "MIB": 1 << 20,
		"G": 1 << 30, "GB": 1 << 30, "GIB": 1 << 30, "T": 1 << 40, "TB": 1 << 40, "TIB": 1 << 40}
	m, ok := mult[unit]
	if !ok {
		return 0, fmt.Errorf("%w %q: unknown unit %q", errSize, s, unit)
	}
	if n > math.MaxInt64/m {
		return 0, fmt.Errorf("%w %q: too large", errSize, s)
	}
	return n * m, nil
}

// Duration re-exports time.Duration for configs that want text decoding.
type Duration = time.Duration

// Environ is os.Environ, named for callers that build Options.
func Environ() []string { return os.Environ() }
