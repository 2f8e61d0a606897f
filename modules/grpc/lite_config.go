package grpc

import (
	"fmt"
	"time"
)

// LiteConfig bounds lite topics (RocketMQ 5.5, RIP-83; lite.go): the
// grpc.lite section.
type LiteConfig struct {
	// TTL deletes a lite topic nothing was sent to for this long; its
	// subscribers are told with NotifyUnsubscribeLiteCommand. 0 keeps lite
	// topics until their parent goes. Default 24h.
	TTL time.Duration `koanf:"ttl"`
	// TopicQuota bounds the lite topics of one parent topic: one more is
	// refused with LITE_TOPIC_QUOTA_EXCEEDED. Default 2,000,000.
	TopicQuota int `koanf:"topic_quota"`
	// SubscriptionQuota bounds the lite topics one client subscribes to,
	// over all its groups: LITE_SUBSCRIPTION_QUOTA_EXCEEDED beyond it.
	// Answered to the clients in their settings. Default 100,000.
	SubscriptionQuota int `koanf:"subscription_quota"`
	// MaxNameLength bounds a lite topic's name (max_lite_topic_size in the
	// clients' settings). Default 64.
	MaxNameLength int `koanf:"max_name_length"`
	// SweepBatch is how many lite topics one TTL sweep tick (every
	// second) looks at; a tick also stops after 2ms (liteSweepBudget),
	// and one cut short is followed by the next 10ms later. Default 4096.
	SweepBatch int `koanf:"sweep_batch"`
	// SnapshotInterval is how often the lite index snapshot
	// (<data>/lite/lite.snapshot, lite_snapshot.go) is written again when
	// the index changed; 0 writes it only at a clean stop and after
	// SnapshotChanges. A start reads the parent topics' records after the
	// snapshot, so this bounds the start's work after a crash. Default 5m.
	SnapshotInterval time.Duration `koanf:"snapshot_interval"`
	// SnapshotChanges writes the snapshot sooner, once this many lite
	// topics were made or deleted and messages sent to them since the last
	// one (at most every 10s). Default 200,000.
	SnapshotChanges int `koanf:"snapshot_changes"`
}

func defaultLiteConfig() LiteConfig {
	return LiteConfig{TTL: 24 * time.Hour, TopicQuota: 2_000_000, SubscriptionQuota: 100_000, MaxNameLength: 64, SweepBatch: 4096,
		SnapshotInterval: 5 * time.Minute, SnapshotChanges: 200_000}
}

func (c *LiteConfig) validate() error {
	if c.TTL < 0 {
		return fmt.Errorf("config: grpc.lite.ttl: %v is negative (0 keeps lite topics)", c.TTL)
	}
	if c.SnapshotInterval < 0 {
		return fmt.Errorf("config: grpc.lite.snapshot_interval: %v is negative (0 writes the snapshot at a clean stop and after snapshot_changes)", c.SnapshotInterval)
	}
	for _, v := range []struct {
		key string
		n   int
	}{{"topic_quota", c.TopicQuota}, {"subscription_quota", c.SubscriptionQuota}, {"max_name_length", c.MaxNameLength}, {"sweep_batch", c.SweepBatch}, {"snapshot_changes", c.SnapshotChanges}} {
		if v.n < 1 {
			return fmt.Errorf("config: grpc.lite.%s: %d must be positive", v.key, v.n)
		}
	}
	if c.MaxNameLength > 255 {
		return fmt.Errorf("config: grpc.lite.max_name_length: %d is over 255", c.MaxNameLength)
	}
	return nil
}
