package store

import "context"

// Truncater is an optional interface of a Provider whose engine can cut
// its log above an offset. It works on a closed store, before Open: the
// replication module (modules/ha) uses it when a broker that rejoins its
// group under automatic failover holds records the new master lacks.
type Truncater interface {
	// TruncateLog cuts the closed store in deps.Settings.Dir (opened with
	// cfg, as Open would be) so that its log ends at offset, which must be
	// a record boundary of it (or its end): the records at and above
	// offset, and their consume-queue and index entries, are gone when
	// the store opens next. A log that ends at or below offset is left
	// alone. It reports whether anything was cut. Offsets below the
	// first retained one are ErrOffsetOutOfRange.
	TruncateLog(ctx context.Context, cfg any, deps Deps, offset int64) (bool, error)
}
