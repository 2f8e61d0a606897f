package mirror

import (
	"fmt"
	"regexp"
	"slices"
	"time"

	"github.com/quivermq/quiver/core/config"
	"github.com/quivermq/quiver/core/protocol"
)

// Config is the mirror section: the links this process runs.
type Config struct {
	// Links are the mirrors to run; none (the default) runs nothing.
	Links []Link `koanf:"links"`
}

// Cluster is one end of a link.
type Cluster struct {
	// Namesrv lists the cluster's name servers; the address scheme picks
	// the transport (quic://host:9876, nats://..., plain host:port is TCP).
	// A link's source left empty is the cluster of the broker running it
	// (its broker.namesrv).
	Namesrv []string `koanf:"namesrv"`
	// Cluster is the cluster's name (its brokers' broker.cluster), which
	// mirrored messages carry as their origin. Empty: read from the
	// cluster's topic routes.
	Cluster string `koanf:"cluster"`
	// AccessKey and SecretKey sign requests to a cluster with ACL on.
	AccessKey string `koanf:"access_key"`
	SecretKey string `koanf:"secret_key"`
}

// Filter selects the messages of the source topics to mirror.
type Filter struct {
	// Type is TAG or SQL92.
	Type string `koanf:"type"`
	// Expression is the tag expression ("a || b", * for all) or the
	// SQL92 condition; empty mirrors everything.
	Expression string `koanf:"expression"`
}

// Link is one mirror: a set of topics of a source cluster written into a
// target cluster.
type Link struct {
	// Name identifies the link; its checkpoint topic in the target is
	// MIRROR_CHECKPOINT_<name>. Letters, digits, - and _.
	Name   string  `koanf:"name"`
	Source Cluster `koanf:"source"`
	Target Cluster `koanf:"target"`
	// Topics are source topics to mirror by name; TopicPattern a regular
	// expression (Go syntax, matched against the whole name) for more.
	// Retry, dead-letter and system topics are never mirrored.
	Topics       []string `koanf:"topics"`
	TopicPattern string   `koanf:"topic_pattern"`
	Filter       Filter   `koanf:"filter"`
	// Groups are consumer groups whose committed offsets in the source are
	// translated and written in the target every CheckpointInterval, so
	// they can continue there (failover).
	Groups []string `koanf:"groups"`
	// CheckpointInterval is how often the link's positions (and the
	// groups' translated offsets) are written to the target: at most that
	// much is mirrored again, and refused as copies, after a crash.
	CheckpointInterval time.Duration `koanf:"checkpoint_interval"`
	// BatchSize bounds the messages of one pull and one write per queue
	// (the source's broker.pull_bytes_max bounds a pull's bytes too).
	BatchSize int `koanf:"batch_size"`
	// BatchBytes bounds the bytes of one write; the link's memory is at
	// most two batches per source queue.
	BatchBytes config.ByteSize `koanf:"batch_bytes"`
	// RateLimit caps the messages per second the link writes (0: none),
	// so a catch-up after a long cut does not starve the target's live
	// traffic.
	RateLimit int `koanf:"rate_limit"`
	// CreateTopics creates a missing target topic with the source's
	// queue count (and the checkpoint topic).
	CreateTopics bool `koanf:"create_topics"`
	// RefreshInterval is how often source topics and routes are listed
	// again (new topics matching the pattern, new queues).
	RefreshInterval time.Duration `koanf:"refresh_interval"`
	// MaxBackoff bounds the wait between attempts after a failure (it
	// starts at 100ms and doubles).
	MaxBackoff time.Duration `koanf:"max_backoff"`
	// StartFrom is where a queue without a checkpoint starts: earliest
	// (the default: everything the source still holds) or latest.
	StartFrom string `koanf:"start_from"`
	// CatchUp is the order a link with a backlog writes in: oldest_first
	// (the default: each source queue in order) or newest_first: when a
	// queue is more than catchUpGap batches behind, the link writes the
	// live tail first and fills the gap behind it concurrently, with the
	// live writes first in line for the rate limit. Ordered topics (the
	// order flag, message.type FIFO, or orderTopicConf routes) ignore it
	// and stay oldest first.
	CatchUp string `koanf:"catch_up"`
}

// Catch-up orders (Link.CatchUp).
const (
	CatchUpOldestFirst = "oldest_first"
	CatchUpNewestFirst = "newest_first"
)

// NewConfig returns the defaults (no links).
func NewConfig() *Config { return &Config{} }

// LinkDefaults fills the unset fields of l with their defaults.
func LinkDefaults(l *Link) {
	if l.CheckpointInterval == 0 {
		l.CheckpointInterval = time.Second
	}
	if l.BatchSize == 0 {
		l.BatchSize = 256
	}
	if l.BatchBytes == 0 {
		l.BatchBytes = 1 << 20
	}
	if l.RefreshInterval == 0 {
		l.RefreshInterval = 30 * time.Second
	}
	if l.MaxBackoff == 0 {
		l.MaxBackoff = 10 * time.Second
	}
	if l.StartFrom == "" {
		l.StartFrom = "earliest"
	}
	if l.Filter.Type == "" {
		l.Filter.Type = "TAG"
	}
	if l.CatchUp == "" {
		l.CatchUp = CatchUpOldestFirst
	}
}

// NewConfigFrom decodes the mirror section strictly and validates it.
func NewConfigFrom(cfg *config.Config) (*Config, error) {
	c := NewConfig()
	if err := cfg.Decode("mirror", c); err != nil {
		return nil, err
	}
	for i := range c.Links {
		if !cfg.Exists(fmt.Sprintf("mirror.links.%d.create_topics", i)) {
			c.Links[i].CreateTopics = true
		}
	}
	return c, c.Validate()
}

var linkName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// Validate reports every problem with its key.
func (c *Config) Validate() error {
	var errs config.Errors
	seen := map[string]bool{}
	for i := range c.Links {
		l := &c.Links[i]
		LinkDefaults(l)
		k := fmt.Sprintf("mirror.links.%d.", i)
		if !linkName.MatchString(l.Name) {
			errs.Add(k+"name", "%q must be 1 to 64 letters, digits, - or _", l.Name)
		} else if seen[l.Name] {
			errs.Add(k+"name", "%q names two links", l.Name)
		}
		seen[l.Name] = true
		if len(l.Target.Namesrv) == 0 {
			errs = append(errs, &config.KeyError{Key: k + "target.namesrv", Subject: true, Msg: "is empty: list the target cluster's name servers"})
		}
		if l.Source.Cluster != "" && l.Source.Cluster == l.Target.Cluster {
			errs.Add(k+"target.cluster", "%q is also the source's cluster", l.Target.Cluster)
		}
		if len(l.Topics) == 0 && l.TopicPattern == "" {
			errs = append(errs, &config.KeyError{Key: k + "topics", Subject: true, Msg: "is empty and topic_pattern unset: name the topics to mirror"})
		}
		for _, t := range l.Topics {
			if err := protocol.ValidateTopic(t); err != nil {
				errs.Add(k+"topics", "%s: %v", t, err)
			}
		}
		if l.TopicPattern != "" {
			if _, err := regexp.Compile(l.TopicPattern); err != nil {
				errs.Add(k+"topic_pattern", "%v", err)
			}
		}
		if !slices.Contains([]string{"TAG", "SQL92"}, l.Filter.Type) {
			errs.Add(k+"filter.type", "%q is neither TAG nor SQL92", l.Filter.Type)
		}
		for _, g := range l.Groups {
			if err := protocol.ValidateGroup(g); err != nil {
				errs.Add(k+"groups", "%s: %v", g, err)
			}
		}
		if l.CheckpointInterval < 10*time.Millisecond {
			errs.Add(k+"checkpoint_interval", "%s is under 10ms", l.CheckpointInterval)
		}
		if l.BatchSize < 1 || l.BatchSize > 1024 {
			errs.Add(k+"batch_size", "%d is not within 1..1024", l.BatchSize)
		}
		if l.BatchBytes < 1<<10 || l.BatchBytes > 8<<20 {
			errs.Add(k+"batch_bytes", "%d is not within 1 KiB..8 MiB", l.BatchBytes)
		}
		if l.RateLimit < 0 {
			errs.Add(k+"rate_limit", "%d is negative", l.RateLimit)
		}
		if l.RefreshInterval < 100*time.Millisecond {
			errs.Add(k+"refresh_interval", "%s is under 100ms", l.RefreshInterval)
		}
		if l.MaxBackoff < 100*time.Millisecond {
			errs.Add(k+"max_backoff", "%s is under 100ms", l.MaxBackoff)
		}
		if l.StartFrom != "earliest" && l.StartFrom != "latest" {
			errs.Add(k+"start_from", "%q is neither earliest nor latest", l.StartFrom)
		}
		if l.CatchUp != CatchUpOldestFirst && l.CatchUp != CatchUpNewestFirst {
			errs.Add(k+"catch_up", "%q is neither %s nor %s", l.CatchUp, CatchUpOldestFirst, CatchUpNewestFirst)
		}
	}
	return errs.Err()
}
