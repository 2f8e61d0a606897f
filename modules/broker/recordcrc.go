package broker

import "github.com/quivermq/quiver/core/store"

// Records leave the broker as Java's do with enabledAppendPropCRC off (its
// default): without the checksum property the engine ends each stored
// record with (store.HideRecordCRC), unless broker.deliver_record_crc asks
// for it. Replication copies the commit log as stored, with it.

// forClient returns the stored record rec as a client sees it; rec must be
// the caller's own copy (it is changed in place).
func (b *Broker) forClient(rec []byte) []byte {
	if b.current().DeliverRecordCRC {
		return rec
	}
	return store.HideRecordCRC(rec)
}

// recordsForClient applies forClient to every record of a read. It
// reports whether any record changed length, in which case the read's
// contiguous runs no longer describe the records.
func (b *Broker) recordsForClient(recs [][]byte) (changed bool) {
	if b.current().DeliverRecordCRC {
		return false
	}
	for i, rec := range recs {
		if out := store.HideRecordCRC(rec); len(out) != len(rec) {
			recs[i], changed = out, true
		}
	}
	return changed
}
