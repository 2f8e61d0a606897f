package store

// Read defaults, as documented on ReadOptions (RocketMQ's in-memory pull
// limits), shared by every engine.
const (
	DefaultMaxMessages = 32
	DefaultMaxBytes    = 256 << 10
	MinMaxScan         = 800
)

// Limits returns the bounds of a read with the defaults applied.
func (o ReadOptions) Limits() (maxMessages, maxBytes int, maxScan int64) {
	maxMessages, maxBytes, maxScan = o.MaxMessages, o.MaxBytes, int64(o.MaxScan)
	if maxMessages <= 0 {
		maxMessages = DefaultMaxMessages
	}
	if maxBytes <= 0 {
		maxBytes = DefaultMaxBytes
	}
	if maxScan <= 0 {
		maxScan = int64(max(MinMaxScan, maxMessages*20))
	}
	return maxMessages, maxBytes, maxScan
}

// Classify applies RocketMQ's GetMessageStatus table to a read at offset
// on a queue holding [min, max): it records min and max in r and, when
// there is nothing to scan (empty queue, offset below min, at or past
// max), sets Status and NextOffset and reports false.
func (r *ReadResult) Classify(offset, min, max int64) bool {
	r.MinOffset, r.MaxOffset = min, max
	switch {
	case max == 0:
		r.Status, r.NextOffset = NoMessageInQueue, 0
	case offset < min:
		r.Status, r.NextOffset = OffsetTooSmall, min
	case offset == max:
		r.Status, r.NextOffset = OffsetOverflowOne, offset
	case offset > max:
		r.Status, r.NextOffset = OffsetOverflowBadly, max
	default:
		return true
	}
	return false
}
