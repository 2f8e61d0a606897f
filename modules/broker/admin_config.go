package broker

// GET_BROKER_CONFIG (26) and UPDATE_BROKER_CONFIG (25): the broker's
// configuration as Java properties text, and run-time changes to the keys
// that can change without a restart.
//
// The body lists every broker.* key under its Quiver name (broker.<key>)
// and, where Apache RocketMQ has a key with the same meaning, under the
// Java name too (brokerName, maxTransferCountOnMessageInMemory, ...), in
// Java's units (milliseconds, bytes), so mqadmin getBrokerConfig and the
// dashboard read what they expect. An update may use either name.
//
// Run-time keys are the pull limits, polling, the message size limit, the
// send-queue wait (the flow-control threshold), the client expiry and
// autoCreateTopicEnable: they are read per request or per scan, so a new
// value takes effect at once. Java's brokerPermission, fileReservedTime
// and deleteWhen are applied at once too (javaKeys: the registered
// permission, and storage's retention loop); flushDiskType is refused
// unless unchanged (Java stores it and applies it at the next start).
// Everything else (addresses, identity, role, queue counts tied to TBW102,
// timer periods, capacities and quotas sized at start) is refused with
// NO_PERMISSION naming the keys, like Java's configBlackList; unknown keys
// and bad values are refused with SYSTEM_ERROR. An update is all or
// nothing and is checked with Config.Validate. Changes live until the
// broker stops: the configuration file stays the source of truth.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quivermq/quiver/core/config"
	"github.com/quivermq/quiver/core/protocol"
	"github.com/quivermq/quiver/core/remoting"
	"github.com/quivermq/quiver/core/store"
	"github.com/quivermq/quiver/core/store/retention"
)

// runtimeConfig holds the configuration in force once it changed at run
// time. Its zero value means "as started" (Broker.cfg).
type runtimeConfig struct {
	live atomic.Pointer[Config] // immutable once stored

	mu      sync.Mutex // serialises updates (Java: synchronized)
	counter int64
	stamp   int64
	// resumed holds the commit-log offsets RESUME_CHECK_HALF_MESSAGE put
	// back (admin_store.go).
	resumed map[int64]bool
	// perm is Java's brokerPermission plus one (0: never set, 6 = RW).
	perm atomic.Int32
}

// brokerPermission is the mask registered topic permissions are ANDed
// with: every bit while the broker is readable and writable (Java ANDs
// only then, keeping TBW102's inherit bit), else brokerPermission.
func (b *Broker) brokerPermission() int32 {
	p := b.javaPerm()
	if p&protocol.PermRead != 0 && p&protocol.PermWrite != 0 {
		return ^int32(0)
	}
	return p
}

// retention is storage.retention in force: the retention loop's, which
// fileReservedTime changes, else the one the broker started with.
func (b *Broker) retention() time.Duration {
	if b.deps.Cleaner != nil {
		r, _ := b.deps.Cleaner.Schedule()
		return r
	}
	return b.deps.Retention
}

// javaPerm is brokerPermission as GET_BROKER_CONFIG prints it.
func (b *Broker) javaPerm() int32 {
	if p := b.rt.perm.Load(); p > 0 {
		return p - 1
	}
	return protocol.PermRead | protocol.PermWrite
}

// registeredTopics is the topic table as registrations carry it: each
// permission ANDed with brokerPermission (Java's registerBrokerAll).
func (b *Broker) registeredTopics() protocol.TopicConfigWrapper {
	w := b.topics.snapshot()
	mask := b.brokerPermission()
	if mask == ^int32(0) {
		return w
	}
	for name, tc := range w.TopicConfigTable {
		cp := *tc
		cp.Perm &= mask
		w.TopicConfigTable[name] = &cp
	}
	return w
}

// javaKey is a Java key of UPDATE_BROKER_CONFIG that is no broker.* key:
// the value lives elsewhere (the registration, storage's retention loop).
type javaKey struct {
	get func(b *Broker) string
	// check parses a value; apply applies a checked one (under rt.mu).
	check func(b *Broker, v string) (any, error)
	apply func(b *Broker, v any)
}

// javaKeys are brokerPermission (the permission registered with the name
// servers), fileReservedTime (hours, storage.retention), deleteWhen
// (hours "04;16", storage.clean_at) and flushDiskType (storage.flush,
// fixed at start).
func javaKeys() map[string]javaKey {
	return map[string]javaKey{
		"brokerPermission": {
			get: func(b *Broker) string { return strconv.Itoa(int(b.javaPerm())) },
			check: func(_ *Broker, v string) (any, error) {
				n, err := parseInt(v)
				if err == nil && (n < 0 || n > protocol.PermRead|protocol.PermWrite|protocol.PermInherit) {
					err = fmt.Errorf("%q is not a permission (2 write, 4 read, 6 both)", v)
				}
				return int32(n), err
			},
			apply: func(b *Broker, v any) {
				b.rt.perm.Store(v.(int32) + 1)
				b.topics.touch() // name servers take the next table whole
				b.triggerRegister()
			},
		},
		"fileReservedTime": {
			get: func(b *Broker) string { return strconv.FormatInt(int64(b.retention()/time.Hour), 10) },
			check: func(b *Broker, v string) (any, error) {
				if b.deps.Cleaner == nil {
					return nil, errors.New("this broker's store has no retention loop")
				}
				n, err := parseInt(v)
				if err == nil && n <= 0 {
					err = fmt.Errorf("%q: want whole hours above 0", v)
				}
				return time.Duration(n) * time.Hour, err
			},
			apply: func(b *Broker, v any) {
				_, at := b.deps.Cleaner.Schedule()
				b.deps.Cleaner.SetSchedule(v.(time.Duration), at)
			},
		},
		"deleteWhen": {
			get: func(b *Broker) string {
				if b.deps.Cleaner == nil {
					return ""
				}
				_, at := b.deps.Cleaner.Schedule()
				hs := make([]string, len(at))
				for i, h := range at {
					hs[i] = fmt.Sprintf("%02d", h)
				}
				return strings.Join(hs, ";")
			},
			check: func(b *Broker, v string) (any, error) {
				if b.deps.Cleaner == nil {
					return nil, errors.New("this broker's store has no retention loop")
				}
				hs, err := retention.ParseHours(v)
				if err == nil && len(hs) == 0 {
					err = fmt.Errorf("%q: want hours such as 04 or 04;16", v)
				}
				return hs, err
			},
			apply: func(b *Broker, v any) {
				r, _ := b.deps.Cleaner.Schedule()
				b.deps.Cleaner.SetSchedule(r, v.([]int))
			},
		},
		"flushDiskType": {
			get: func(b *Broker) string { return flushDiskType(b.deps.StoreFlush) },
			check: func(b *Broker, v string) (any, error) {
				if cur := flushDiskType(b.deps.StoreFlush); strings.TrimSpace(v) != cur {
					return nil, errFixedAtStart
				}
				return nil, nil
			},
			apply: func(*Broker, any) {},
		},
	}
}

var errFixedAtStart = errors.New("fixed at start")

// flushDiskType names storage.flush as Java's FlushDiskType.
func flushDiskType(m store.FlushMode) string {
	if m == store.FlushSync {
		return "SYNC_FLUSH"
	}
	return "ASYNC_FLUSH"
}

// current returns the configuration in force; callers must not modify it.
func (b *Broker) current() *Config {
	if c := b.rt.live.Load(); c != nil {
		return c
	}
	return b.cfg
}

// configKey is one broker.* key: its Quiver name, its Java name when
// RocketMQ has the same setting, how to print it (Quiver and Java forms)
// and, for run-time keys, how to set it from either form.
type configKey struct {
	name string // under broker.
	java string
	get  func(*Config) string
	// getJava prints the Java form (default: get).
	getJava func(*Config) string
	// set applies a Quiver-form value; setJava a Java-form one (default:
	// set). Nil set: fixed at start.
	set     func(*Config, string) error
	setJava func(*Config, string) error
}

func ms(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) }

func parseMs(s string) (time.Duration, error) {
	n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%q is not a whole number of milliseconds", s)
	}
	return time.Duration(n) * time.Millisecond, nil
}

func parseDur(s string) (time.Duration, error) {
	d, err := time.ParseDuration(strings.TrimSpace(s))
	if err != nil {
		return 0, fmt.Errorf("%q is not a duration such as 500ms or 20s", s)
	}
	return d, nil
}

func parseInt(s string) (int, error) {
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil {
		return 0, fmt.Errorf("%q is not an integer", s)
	}
	return n, nil
}

// parseBool is strict (true/false in any case), unlike Java's
// Boolean.parseBoolean which reads any other word as false.
func parseBool(s string) (bool, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	return false, fmt.Errorf("%q is neither true nor false", s)
}

func durKey(name, java string, f func(*Config) *time.Duration, runtime bool) configKey {
	k := configKey{name: name, java: java,
		get:     func(c *Config) string { return f(c).String() },
		getJava: func(c *Config) string { return ms(*f(c)) },
	}
	if runtime {
		k.set = func(c *Config, s string) error {
			d, err := parseDur(s)
			*f(c) = d
			return err
		}
		k.setJava = func(c *Config, s string) error {
			d, err := parseMs(s)
			*f(c) = d
			return err
		}
	}
	return k
}

func fixed(name, java string, get func(*Config) string) configKey {
	return configKey{name: name, java: java, get: get}
}

// configKeys lists the broker.* keys in the order they are printed.
func configKeys() []configKey {
	b2s := strconv.FormatBool
	return []configKey{
		fixed("listen", "", func(c *Config) string { return c.Listen }),
		fixed("advertise", "", func(c *Config) string { return c.AdvertiseAddr() }),
		fixed("name", "brokerName", func(c *Config) string { return c.Name }),
		fixed("cluster", "brokerClusterName", func(c *Config) string { return c.Cluster }),
		fixed("id", "brokerId", func(c *Config) string { return strconv.FormatInt(c.ID, 10) }),
		fixed("role", "brokerRole", func(c *Config) string { return c.Role }),
		{name: "namesrv", java: "namesrvAddr", get: func(c *Config) string { return strings.Join(c.Namesrv, ",") },
			getJava: func(c *Config) string { return strings.Join(c.Namesrv, ";") }},
		{name: "auto_create_topic", java: "autoCreateTopicEnable", get: func(c *Config) string { return b2s(c.AutoCreateTopic) },
			set: func(c *Config, s string) (err error) { c.AutoCreateTopic, err = parseBool(s); return err }},
		fixed("default_topic_queues", "defaultTopicQueueNums", func(c *Config) string { return strconv.Itoa(c.DefaultTopicQueues) }),
		durKey("register_interval", "registerNameServerPeriod", func(c *Config) *time.Duration { return &c.RegisterInterval }, false),
		{name: "long_polling", java: "longPollingEnable", get: func(c *Config) string { return b2s(c.LongPolling) },
			set: func(c *Config, s string) (err error) { c.LongPolling, err = parseBool(s); return err }},
		durKey("max_suspend", "", func(c *Config) *time.Duration { return &c.MaxSuspend }, true),
		durKey("short_polling", "shortPollingTimeMills", func(c *Config) *time.Duration { return &c.ShortPolling }, true),
		durKey("client_expiry", "channelExpiredTimeout", func(c *Config) *time.Duration { return &c.ClientExpiry }, true),
		durKey("scan_interval", "", func(c *Config) *time.Duration { return &c.ScanInterval }, false),
		durKey("offset_flush_interval", "flushConsumerOffsetInterval", func(c *Config) *time.Duration { return &c.OffsetFlushInterval }, false),
		sizeKey("max_message_size", "maxMessageSize", func(c *Config) *config.ByteSize { return &c.MaxMessageSize }),
		{name: "pull_batch_max", java: "maxTransferCountOnMessageInMemory", get: func(c *Config) string { return strconv.Itoa(c.PullBatchMax) },
			set: func(c *Config, s string) (err error) { c.PullBatchMax, err = parseInt(s); return err }},
		sizeKey("pull_bytes_max", "maxTransferBytesOnMessageInMemory", func(c *Config) *config.ByteSize { return &c.PullBytesMax }),
		durKey("rebalance_lock_max_live_time", "", func(c *Config) *time.Duration { return &c.RebalanceLockMaxLiveTime }, false),
		durKey("busy_timeout", "waitTimeMillsInSendQueue", func(c *Config) *time.Duration { return &c.BusyTimeout }, true),
		durKey("store_busy_timeout", "osPageCacheBusyTimeOutMills", func(c *Config) *time.Duration { return &c.StoreBusyTimeout }, true),
		fixed("send_queue_capacity", "sendThreadPoolQueueCapacity", func(c *Config) string { return strconv.Itoa(c.SendQueueCapacity) }),
		fixed("trace_topic_enable", "traceTopicEnable", func(c *Config) string { return b2s(c.TraceTopicEnable) }),
		fixed("trace_topic_name", "msgTraceTopicName", func(c *Config) string { return c.TraceTopicName }),
		{name: "validate_system_topic_when_update_topic", java: "validateSystemTopicWhenUpdateTopic",
			get: func(c *Config) string { return b2s(c.ValidateSystemTopicWhenUpdateTopic) },
			set: func(c *Config, s string) (err error) {
				c.ValidateSystemTopicWhenUpdateTopic, err = parseBool(s)
				return err
			}},
	}
}

func sizeKey(name, java string, f func(*Config) *config.ByteSize) configKey {
	return configKey{name: name, java: java,
		get:     func(c *Config) string { return f(c).String() },
		getJava: func(c *Config) string { return strconv.FormatInt(int64(*f(c)), 10) },
		set: func(c *Config, s string) error {
			n, err := config.ParseByteSize(s)
			*f(c) = config.ByteSize(n)
			return err
		},
	}
}

// ConfigProperties renders the configuration in force as Java properties
// text (key=value lines, as Java's MixAll.properties2String writes them):
// Java-named keys first, then every broker.* key.
func (b *Broker) ConfigProperties() string {
	c := b.current()
	var sb strings.Builder
	keys := configKeys()
	for _, k := range keys {
		if k.java == "" {
			continue
		}
		get := k.getJava
		if get == nil {
			get = k.get
		}
		sb.WriteString(k.java + "=" + get(c) + "\n")
	}
	// Java-only views of the addresses.
	if ap, err := netip.ParseAddrPort(c.AdvertiseAddr()); err == nil {
		sb.WriteString("brokerIP1=" + ap.Addr().String() + "\n")
	}
	if _, port, err := net.SplitHostPort(c.Listen); err == nil {
		sb.WriteString("listenPort=" + port + "\n")
	}
	jk := javaKeys()
	for _, name := range sortedKeys(jk) {
		sb.WriteString(name + "=" + jk[name].get(b) + "\n")
	}
	for _, k := range keys {
		sb.WriteString("broker." + k.name + "=" + k.get(c) + "\n")
	}
	for _, name := range sortedKeys(c.Quota.Topics) {
		l := c.Quota.Topics[name]
		fmt.Fprintf(&sb, "broker.quota.topics.%s.messages_per_sec=%g\nbroker.quota.topics.%s.bytes_per_sec=%g\n", name, l.MessagesPerSec, name, l.BytesPerSec)
	}
	for _, name := range sortedKeys(c.Quota.Groups) {
		l := c.Quota.Groups[name]
		fmt.Fprintf(&sb, "broker.quota.groups.%s.messages_per_sec=%g\nbroker.quota.groups.%s.bytes_per_sec=%g\n", name, l.MessagesPerSec, name, l.BytesPerSec)
	}
	return sb.String()
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// ConfigVersion returns the configuration's DataVersion as Java writes it
// (fastjson: fields in alphabetical order).
func (b *Broker) ConfigVersion() string {
	b.rt.mu.Lock()
	defer b.rt.mu.Unlock()
	return fmt.Sprintf(`{"counter":%d,"timestamp":%d}`, b.rt.counter, b.rt.stampLocked(b.obs.bootMs))
}

func (r *runtimeConfig) stampLocked(boot int64) int64 {
	if r.stamp == 0 {
		r.stamp = boot
		if r.stamp == 0 {
			r.stamp = nowMs()
		}
	}
	return r.stamp
}

// ConfigUpdateError refuses an UPDATE_BROKER_CONFIG; Code is the answer's
// response code.
type ConfigUpdateError struct {
	Code   int32
	Reason string
}

func (e *ConfigUpdateError) Error() string { return "broker: update config: " + e.Reason }

// UpdateConfig applies run-time changes, all or none: props maps Quiver
// (broker.<key>) or Java key names to values in that name's form. It
// returns the keys changed.
func (b *Broker) UpdateConfig(props map[string]string) ([]string, error) {
	byName := map[string]configKey{}
	javaName := map[string]bool{}
	for _, k := range configKeys() {
		byName["broker."+k.name] = k
		if k.java != "" {
			byName[k.java] = k
			javaName[k.java] = true
		}
	}
	names := sortedKeys(props)
	jk := javaKeys()
	var unknown, static []string
	var bad config.Errors
	checked := map[string]any{}
	for _, n := range names {
		k, ok := byName[n]
		if j, isJava := jk[n]; isJava {
			v, err := j.check(b, props[n])
			switch {
			case errors.Is(err, errFixedAtStart):
				static = append(static, n)
			case err != nil:
				bad.Add(n, "%v", err)
			default:
				checked[n] = v
			}
			continue
		}
		switch {
		case !ok && (n == "brokerIP1" || n == "listenPort" || strings.HasPrefix(n, "broker.quota.")):
			static = append(static, n)
		case !ok:
			unknown = append(unknown, n)
		case k.set == nil:
			static = append(static, n)
		}
	}
	if len(unknown) > 0 {
		return nil, &ConfigUpdateError{Code: remoting.SystemError, Reason: fmt.Sprintf("unknown keys %s (known: the broker.* keys and their Java names in GET_BROKER_CONFIG)", strings.Join(unknown, ", "))}
	}
	if len(static) > 0 {
		return nil, &ConfigUpdateError{Code: remoting.NoPermission, Reason: fmt.Sprintf("keys %s are fixed at start; change them in the configuration and restart the broker", strings.Join(static, ", "))}
	}
	if err := bad.Err(); err != nil {
		return nil, &ConfigUpdateError{Code: remoting.SystemError, Reason: err.Error()}
	}
	b.rt.mu.Lock()
	defer b.rt.mu.Unlock()
	next := *b.current()
	for _, n := range names {
		if _, isJava := checked[n]; isJava {
			continue
		}
		k := byName[n]
		set := k.set
		if javaName[n] && k.setJava != nil {
			set = k.setJava
		}
		if err := set(&next, props[n]); err != nil {
			bad.Add(n, "%v", err)
		}
	}
	if err := bad.Err(); err != nil {
		return nil, &ConfigUpdateError{Code: remoting.SystemError, Reason: err.Error()}
	}
	if err := next.Validate(); err != nil {
		return nil, &ConfigUpdateError{Code: remoting.SystemError, Reason: err.Error()}
	}
	for _, n := range names {
		if v, isJava := checked[n]; isJava {
			jk[n].apply(b, v)
		}
	}
	if next.AutoCreateTopic && !b.current().AutoCreateTopic {
		b.ensureAutoCreateTopic(&next)
	}
	b.rt.live.Store(&next)
	b.gate.setBusyTimeout(next.BusyTimeout, next.StoreBusyTimeout)
	b.rt.stampLocked(b.obs.bootMs)
	b.rt.counter++
	b.rt.stamp = nowMs()
	return names, nil
}

// ensureAutoCreateTopic creates TBW102 when autoCreateTopicEnable is
// turned on at run time on a broker started without it (which removed
// it): producers find the template's route and may create topics.
func (b *Broker) ensureAutoCreateTopic(c *Config) {
	n := int32(c.DefaultTopicQueues)
	tc := &protocol.TopicConfig{TopicName: protocol.AutoCreateTopic, ReadQueueNums: n, WriteQueueNums: n,
		Perm: protocol.PermInherit | protocol.PermRead | protocol.PermWrite, TopicFilterType: "SINGLE_TAG"}
	if _, created, err := b.topics.putIfAbsent(tc); err != nil {
		b.log.Error("create TBW102 for autoCreateTopicEnable", "err", err)
	} else if created {
		b.triggerRegister()
	}
}

func (b *Broker) handleGetBrokerConfig(ctx context.Context, p *remoting.Peer, req *remoting.Command) *remoting.Command {
	resp := remoting.NewResponse(req, remoting.Success, "")
	resp.Body = []byte(b.ConfigProperties())
	resp.SetExt("version", b.ConfigVersion())
	return resp
}

func (b *Broker) handleUpdateBrokerConfig(ctx context.Context, p *remoting.Peer, req *remoting.Command) *remoting.Command {
	if len(req.Body) == 0 {
		// Java answers SUCCESS to an update without a body.
		return remoting.NewResponse(req, remoting.Success, "")
	}
	props, err := parseProperties(string(req.Body))
	if err != nil {
		return remoting.Errorf(req, remoting.SystemError, fmt.Sprintf("string2Properties error: %v", err))
	}
	changed, err := b.UpdateConfig(props)
	var ce *ConfigUpdateError
	if errors.As(err, &ce) {
		return remoting.Errorf(req, ce.Code, ce.Reason)
	}
	if err != nil {
		return remoting.Errorf(req, remoting.SystemError, err.Error())
	}
	b.log.Info("broker config updated", "keys", changed, "remote", p.RemoteAddr())
	return remoting.NewResponse(req, remoting.Success, "")
}

// parseProperties reads Java properties text as java.util.Properties.load
// does: '#' and '!' comments, key and value split at the first unescaped
// '=', ':' or white space, backslash escapes (\t \n \r \f \uXXXX and any
// other character as itself) and lines continued by a trailing backslash.
// A later key wins.
func parseProperties(s string) (map[string]string, error) {
	out := map[string]string{}
	lines := strings.Split(strings.ReplaceAll(strings.ReplaceAll(s, "\r\n", "\n"), "\r", "\n"), "\n")
	for i := 0; i < len(lines); i++ {
		line := strings.TrimLeft(lines[i], " \t\f")
		if line == "" || line[0] == '#' || line[0] == '!' {
			continue
		}
		for endsWithOddBackslashes(line) && i+1 < len(lines) {
			i++
			line = line[:len(line)-1] + strings.TrimLeft(lines[i], " \t\f")
		}
		line = strings.TrimSuffix(line, `\`)
		// Split at the first unescaped separator.
		sep := len(line)
		for j := 0; j < len(line); j++ {
			if line[j] == '\\' {
				j++
				continue
			}
			if strings.IndexByte("=: \t\f", line[j]) >= 0 {
				sep = j
				break
			}
		}
		rawKey, rest := line[:sep], line[sep:]
		rest = strings.TrimLeft(rest, " \t\f")
		if rest != "" && (rest[0] == '=' || rest[0] == ':') {
			rest = strings.TrimLeft(rest[1:], " \t\f")
		}
		key, err := unescapeProperty(rawKey)
		if err != nil {
			return nil, err
		}
		val, err := unescapeProperty(rest)
		if err != nil {
			return nil, err
		}
		out[key] = val
	}
	return out, nil
}

func endsWithOddBackslashes(s string) bool {
	n := 0
	for i := len(s) - 1; i >= 0 && s[i] == '\\'; i-- {
		n++
	}
	return n%2 == 1
}

func unescapeProperty(s string) (string, error) {
	if !strings.Contains(s, `\`) {
		return s, nil
	}
	var sb strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' || i+1 == len(s) {
			sb.WriteByte(c)
			continue
		}
		i++
		switch s[i] {
		case 't':
			sb.WriteByte('\t')
		case 'n':
			sb.WriteByte('\n')
		case 'r':
			sb.WriteByte('\r')
		case 'f':
			sb.WriteByte('\f')
		case 'u':
			if i+5 > len(s) {
				return "", fmt.Errorf("malformed \\uxxxx encoding in %q", s)
			}
			n, err := strconv.ParseUint(s[i+1:i+5], 16, 16)
			if err != nil {
				return "", fmt.Errorf("malformed \\uxxxx encoding in %q", s)
			}
			sb.WriteRune(rune(n))
			i += 4
		default:
			sb.WriteByte(s[i])
		}
	}
	return sb.String(), nil
}
