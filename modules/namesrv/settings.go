package namesrv

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// runtimeSettings are the settings UPDATE_NAMESRV_CONFIG may change while
// the name server runs. Everything else in Config is read once, at start.
// Changes last until the process exits: the YAML file stays the source of
// truth (Java writes its runtime changes to configStorePath, which its
// name server does not read back unless started with -c on that file).
type runtimeSettings struct {
	orderMessageEnable atomic.Bool
	brokerTimeout      atomic.Int64 // nanoseconds
}

func newRuntimeSettings(cfg *Config) *runtimeSettings {
	r := &runtimeSettings{}
	r.orderMessageEnable.Store(cfg.OrderMessageEnable)
	r.brokerTimeout.Store(int64(cfg.BrokerTimeout))
	return r
}

// runtimeSetting is one key of GET_NAMESRV_CONFIG / UPDATE_NAMESRV_CONFIG.
type runtimeSetting struct {
	// get formats the current value.
	get func(*runtimeSettings) string
	// parse validates a new value and returns how to apply it.
	parse func(string) (func(*runtimeSettings), error)
}

// runtimeKeys are the changeable settings by their properties key. Java's
// names are kept where Java has the setting.
var runtimeKeys = map[string]runtimeSetting{
	// Java NamesrvConfig.orderMessageEnable.
	"orderMessageEnable": {
		get: func(r *runtimeSettings) string { return strconv.FormatBool(r.orderMessageEnable.Load()) },
		parse: func(v string) (func(*runtimeSettings), error) {
			var b bool
			switch {
			case strings.EqualFold(v, "true"):
				b = true
			case strings.EqualFold(v, "false"):
			default:
				return nil, fmt.Errorf("%q is not true or false", v)
			}
			return func(r *runtimeSettings) { r.orderMessageEnable.Store(b) }, nil
		},
	},
	// namesrv.broker_timeout, in milliseconds as Java writes durations.
	"brokerTimeoutMillis": {
		get: func(r *runtimeSettings) string {
			return strconv.FormatInt(time.Duration(r.brokerTimeout.Load()).Milliseconds(), 10)
		},
		parse: func(v string) (func(*runtimeSettings), error) {
			ms, err := strconv.ParseInt(v, 10, 64)
			if err != nil || ms < 1000 || ms > int64(24*time.Hour/time.Millisecond) {
				return nil, fmt.Errorf("%q is not a number of milliseconds in 1000..86400000", v)
			}
			d := time.Duration(ms) * time.Millisecond
			return func(r *runtimeSettings) { r.brokerTimeout.Store(int64(d)) }, nil
		},
	},
}

// fixedKeys are settings that exist but cannot change at run time, with
// what to do instead.
var fixedKeys = map[string]string{
	"listen":             "cannot change at run time: set namesrv.listen and restart",
	"listenPort":         "cannot change at run time: set namesrv.listen and restart",
	"kvConfigPath":       "cannot change at run time: set namesrv.kv_config_path and restart",
	"scanInterval":       "cannot change at run time: set namesrv.scan_interval and restart",
	"scanIntervalMillis": "cannot change at run time: set namesrv.scan_interval and restart",
	"controller":         "cannot change at run time: set namesrv.controller and restart",
	// Java NamesrvConfig and NettyServerConfig keys Quiver has no
	// counterpart for.
	"rocketmqHome":                       javaOnly,
	"configStorePath":                    javaOnly,
	"productEnvName":                     javaOnly,
	"clusterTest":                        javaOnly,
	"serverWorkerThreads":                javaOnly,
	"serverCallbackExecutorThreads":      javaOnly,
	"serverSelectorThreads":              javaOnly,
	"serverOnewaySemaphoreValue":         javaOnly,
	"serverAsyncSemaphoreValue":          javaOnly,
	"serverChannelMaxIdleTimeSeconds":    javaOnly,
	"serverSocketSndBufSize":             javaOnly,
	"serverSocketRcvBufSize":             javaOnly,
	"serverPooledByteBufAllocatorEnable": javaOnly,
	"useEpollNativeSelector":             javaOnly,
}

const javaOnly = "is a Java name server setting Quiver does not have"

// format writes the runtime settings as Java's
// Configuration.getAllConfigsFormatString does: "key=value\n" per key
// (sorted here; Java's order is a hash table's).
func (r *runtimeSettings) format() string {
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(runtimeKeys)) {
		b.WriteString(k + "=" + runtimeKeys[k].get(r) + "\n")
	}
	return b.String()
}

// update applies props all or nothing: a key that is unknown or fixed, or
// a bad value, refuses the whole update with every reason.
func (r *runtimeSettings) update(props []property) error {
	var apply []func(*runtimeSettings)
	var bad []string
	for _, p := range props {
		s, ok := runtimeKeys[p.key]
		if !ok {
			reason, fixed := fixedKeys[p.key]
			if !fixed {
				reason = "unknown setting (changeable at run time: " + strings.Join(slices.Sorted(maps.Keys(runtimeKeys)), ", ") + ")"
			}
			bad = append(bad, p.key+": "+reason)
			continue
		}
		f, err := s.parse(strings.TrimSpace(p.value))
		if err != nil {
			bad = append(bad, p.key+": "+err.Error())
			continue
		}
		apply = append(apply, f)
	}
	if len(bad) > 0 {
		return fmt.Errorf("namesrv: config not updated: %s", strings.Join(bad, "; "))
	}
	for _, f := range apply {
		f(r)
	}
	return nil
}

// property is one key=value of a java.util.Properties text.
type property struct{ key, value string }

// parseProperties reads text as java.util.Properties.load does (Java's
// MixAll.string2Properties): lines ending in \n, \r or \r\n; blank lines
// and lines starting with # or ! are comments; a key ends at the first
// unescaped '=', ':' or white space, after which white space and one '='
// or ':' are skipped; a line ending in an odd number of backslashes
// continues on the next; \t \n \r \f \uXXXX and \<c> escapes. A later key
// replaces an earlier one. Keys keep their first position.
func parseProperties(text string) ([]property, error) {
	var out []property
	idx := map[string]int{}
	for _, line := range logicalLines(text) {
		k, v, err := splitProperty(line)
		if err != nil {
			return nil, err
		}
		if i, ok := idx[k]; ok {
			out[i].value = v
			continue
		}
		idx[k] = len(out)
		out = append(out, property{key: k, value: v})
	}
	return out, nil
}

func isPropSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\f' }

// logicalLines joins continued lines and drops comments and blank lines;
// each result starts at its first non-blank character.
func logicalLines(text string) []string {
	text = strings.ReplaceAll(text, "\r\n", "\n")
	text = strings.ReplaceAll(text, "\r", "\n")
	var out []string
	var cur strings.Builder
	continuing := false
	for _, raw := range strings.Split(text, "\n") {
		line := strings.TrimLeft(raw, " \t\f")
		if !continuing && (line == "" || line[0] == '#' || line[0] == '!') {
			continue
		}
		n := 0
		for i := len(line) - 1; i >= 0 && line[i] == '\\'; i-- {
			n++
		}
		if n%2 == 1 {
			cur.WriteString(line[:len(line)-1])
			continuing = true
			continue
		}
		cur.WriteString(line)
		continuing = false
		out = append(out, cur.String())
		cur.Reset()
	}
	if continuing && cur.Len() > 0 {
		out = append(out, cur.String())
	}
	return out
}

func splitProperty(line string) (key, value string, err error) {
	i := 0
	for i < len(line) {
		c := line[i]
		if c == '\\' {
			i += 2
			continue
		}
		if c == '=' || c == ':' || isPropSpace(c) {
			break
		}
		i++
	}
	end := min(i, len(line))
	rawKey := line[:end]
	j := end
	for j < len(line) && isPropSpace(line[j]) {
		j++
	}
	if j < len(line) && (line[j] == '=' || line[j] == ':') {
		j++
	}
	for j < len(line) && isPropSpace(line[j]) {
		j++
	}
	if key, err = unescapeProperty(rawKey); err != nil {
		return "", "", err
	}
	if value, err = unescapeProperty(line[j:]); err != nil {
		return "", "", err
	}
	return key, value, nil
}

func unescapeProperty(s string) (string, error) {
	if !strings.Contains(s, `\`) {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' || i+1 == len(s) {
			b.WriteByte(c)
			continue
		}
		i++
		switch s[i] {
		case 't':
			b.WriteByte('\t')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 'f':
			b.WriteByte('\f')
		case 'u':
			if i+5 > len(s) {
				return "", fmt.Errorf("namesrv: malformed \\uxxxx encoding in %q", s)
			}
			n, err := strconv.ParseUint(s[i+1:i+5], 16, 16)
			if err != nil {
				return "", fmt.Errorf("namesrv: malformed \\uxxxx encoding in %q", s)
			}
			b.WriteRune(rune(n))
			i += 4
		default:
			b.WriteByte(s[i])
		}
	}
	return b.String(), nil
}
