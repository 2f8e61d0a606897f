// Package config loads Quiver's layered configuration with koanf: struct
// defaults, then a YAML file, then QUIVER_ environment variables (with __
// between levels), then --set key=value flags, later layers winning.
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
	if len(o.Defaults) > 0 {
		if err := k.Load(confmap.Provider(o.Defaults, "."), nil); err != nil {
			return nil, fmt.Errorf("config: defaults: %w", err)
		}
	}
	if o.File != "" {
		if err := k.Load(file.Provider(o.File), yaml.Parser()); err != nil {
			return nil, fmt.Errorf("config: load %s: %w", o.File, err)
		}
	}
	env := map[string]any{}
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
		env[key] = val
	}
	if len(env) > 0 {
		if err := k.Load(confmap.Provider(env, "."), nil); err != nil {
			return nil, fmt.Errorf("config: environment: %w", err)
		}
	}
	for _, s := range o.Sets {
		key, val, ok := strings.Cut(s, "=")
		key = strings.TrimSpace(key)
		if !ok || key == "" {
			return nil, fmt.Errorf("config: --set %q: want key=value", s)
		}
		if err := k.Load(confmap.Provider(map[string]any{key: val}, "."), nil); err != nil {
			return nil, fmt.Errorf("config: --set %q: %w", s, err)
		}
	}
	return &Config{k: k}, nil
}

// FromMap builds a Config from nested or flat values (tests, embedding).
func FromMap(m map[string]any) *Config {
	k := koanf.New(".")
	_ = k.Load(confmap.Provider(m, "."), nil)
	return &Config{k: k}
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
// full key path. An absent section leaves out unchanged.
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
			mapstructure.StringToTimeDurationHookFunc(),
			mapstructure.TextUnmarshallerHookFunc(),
			stringToSliceHook,
		),
	}
	if err := c.k.UnmarshalWithConf(path, out, koanf.UnmarshalConf{Tag: "koanf", DecoderConfig: dc}); err != nil {
		return prefixErr(path, err)
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
	de, ok := err.(*mapstructure.DecodeError)
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
			*errs = append(*errs, fmt.Errorf("unknown key %s", joinKey(key, k)))
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
	return fmt.Errorf("%s: %s", key, msg)
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
	*e = append(*e, fmt.Errorf("%s: %s", key, fmt.Sprintf(format, args...)))
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
