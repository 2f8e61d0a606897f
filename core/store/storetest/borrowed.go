package storetest

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"sync/atomic"
	"testing"

	"github.com/quivermq/quiver/core/message"
	"github.com/quivermq/quiver/core/store"
)

// borrowedCalls keeps the queues of repeated CheckBorrowedInputs calls on
// one store apart.
var borrowedCalls atomic.Int64

// CheckBorrowedInputs checks the ownership contract of Store.Append and
// Metadata.SaveMeta (see store.Store): nothing handed to a call may be
// kept once it returns. It appends messages whose bodies are carved from
// one buffer, as the broker's are from a network frame, then does what
// the broker does next: overwrites that buffer (the transport recycles the
// frame for the next request), clears and refills every Properties map,
// rewrites every *message.Ext (the broker writes the positions into it and
// later reuses it) and reuses the msgs slice for a second Append. Then it
// reads every message back (Read, Lookup, KeyIndexer.QueryByKey) and
// requires the bytes that were appended, not the scribbles.
//
// It takes a testing.TB so that the suite's own tests can show it fails
// for a store that keeps a borrowed body or map.
func CheckBorrowedInputs(t testing.TB, s store.Store) {
	t.Helper()
	ctx := context.Background()
	topic := fmt.Sprintf("Borrowed%d", borrowedCalls.Add(1))
	const n = 12
	type want struct {
		q     store.Queue
		body  []byte
		props message.Properties
	}
	var (
		frame = make([]byte, 0, n*64)
		wants = make([]want, n)
		batch = make([]store.Message, n)
	)
	for i := range n {
		start := len(frame)
		frame = fmt.Appendf(frame, "body %d of a frame the transport will recycle", i)
		body := frame[start:len(frame):len(frame)]
		props := message.Properties{
			message.PropertyTags:    fmt.Sprintf("tag%d", i%3),
			message.PropertyKeys:    fmt.Sprintf("%s-key-%d", topic, i),
			message.PropertyUniqKey: fmt.Sprintf("%s-UNIQ-%02d", topic, i),
			"custom":                fmt.Sprint("value-", i),
		}
		m := Msg(topic, int32(i%3), "", nil)
		m.Body, m.Properties = body, props
		m.TagsCode = message.TagsHashCode(props[message.PropertyTags])
		batch[i] = m
		wants[i] = want{q: store.Queue{Topic: topic, ID: int32(i % 3)}, body: bytes.Clone(body), props: maps.Clone(props)}
	}
	pos, err := s.Append(ctx, batch)
	if err != nil {
		t.Fatalf("Append: %v", err)
	}
	if len(pos) != n {
		t.Fatalf("Append: %d positions for %d messages", len(pos), n)
	}
	exts := make([]*message.Ext, n)
	for i := range batch {
		exts[i] = batch[i].Ext
	}
	scribble(topic, frame, batch)
	// The broker's next request arrives in the recycled frame, decoded
	// into the same maps and structs, and is appended from the same slice.
	for i := range batch {
		batch[i] = store.Message{Ext: exts[i], TagsCode: 1}
		batch[i].Topic, batch[i].QueueID = topic+"Next", 0
		batch[i].Properties = message.Properties{message.PropertyKeys: topic + "-next"}
	}
	if _, err := s.Append(ctx, batch); err != nil {
		t.Fatalf("second Append: %v", err)
	}
	scribble(topic, frame, batch)

	var r store.ReadResult
	next := map[store.Queue]int64{}
	for i, w := range wants {
		rec, err := s.Lookup(ctx, pos[i].CommitLogOffset)
		if err != nil {
			t.Errorf("Lookup(%d): %v", pos[i].CommitLogOffset, err)
			continue
		}
		checkBorrowedRecord(t, "Lookup", i, rec, w.q, w.body, w.props)
		for j := range rec {
			rec[j] = 0xEE // Lookup's record is the caller's
		}
		if again, err := s.Lookup(ctx, pos[i].CommitLogOffset); err != nil {
			t.Errorf("second Lookup(%d): %v", pos[i].CommitLogOffset, err)
		} else {
			checkBorrowedRecord(t, "Lookup after the caller wrote over the record of the first (Lookup must return the caller's own copy)", i, again, w.q, w.body, w.props)
		}
		off, ok := next[w.q]
		if !ok {
			off = pos[i].QueueOffset
		}
		if err := s.Read(ctx, w.q, off, store.ReadOptions{MaxMessages: 1}, &r); err != nil {
			t.Errorf("Read(%s, %d): %v", w.q, off, err)
			continue
		}
		if r.Status != store.Found || len(r.Records) != 1 {
			t.Errorf("Read(%s, %d): %s with %d records, want the appended message", w.q, off, r.Status, len(r.Records))
			continue
		}
		checkBorrowedRecord(t, "Read", i, r.Records[0], w.q, w.body, w.props)
		next[w.q] = r.NextOffset
	}
	if ki, ok := s.(store.KeyIndexer); ok {
		for i, w := range wants {
			recs, err := ki.QueryByKey(ctx, topic, w.props[message.PropertyKeys], 0, 1<<62, 4)
			if err != nil {
				t.Errorf("QueryByKey(%s): %v", w.props[message.PropertyKeys], err)
				continue
			}
			if len(recs) != 1 {
				t.Errorf("QueryByKey(%s): %d records, want 1 (the index kept a borrowed key?)", w.props[message.PropertyKeys], len(recs))
				continue
			}
			checkBorrowedRecord(t, "QueryByKey", i, recs[0], w.q, w.body, w.props)
		}
	}
	if md, ok := s.(store.Metadata); ok {
		doc := []byte(`{"borrowed":"document"}`)
		if err := md.SaveMeta(topic, doc); err != nil {
			t.Fatalf("SaveMeta: %v", err)
		}
		for i := range doc {
			doc[i] = 'X'
		}
		got, err := md.LoadMeta(topic)
		if err != nil {
			t.Fatalf("LoadMeta: %v", err)
		}
		if string(got) != `{"borrowed":"document"}` {
			t.Errorf("LoadMeta after the caller reused SaveMeta's buffer: %q, want the saved document (SaveMeta kept the caller's slice)", got)
		}
	}
}

// scribble does to the caller's side of an Append what the broker and the
// transport do once it returned.
func scribble(topic string, frame []byte, batch []store.Message) {
	for i := range frame[:cap(frame)] {
		frame[:cap(frame)][i] = 0xEE
	}
	for i := range batch {
		m := batch[i].Ext
		clear(m.Properties)
		m.Properties[message.PropertyTags] = "scribbled"
		m.Properties[message.PropertyKeys] = topic + "-scribbled"
		m.Topic, m.QueueID, m.Flag = "Scribbled", 7, -1
		m.QueueOffset, m.CommitLogOffset, m.StoreTimestamp = 1<<40, 1<<40, 1
		m.BornTimestamp, m.ReconsumeTimes = 1, 99
		batch[i].TagsCode = -1
	}
}

func checkBorrowedRecord(t testing.TB, via string, i int, rec []byte, q store.Queue, body []byte, props message.Properties) {
	t.Helper()
	m, _, err := message.DecodeStored(rec)
	if err != nil {
		t.Errorf("%s: message %d: stored record does not decode (%v): the store kept borrowed bytes?", via, i, err)
		return
	}
	if m.Topic != q.Topic || m.QueueID != q.ID {
		t.Errorf("%s: message %d: stored in %s/%d, appended to %s", via, i, m.Topic, m.QueueID, q)
	}
	if !bytes.Equal(m.Body, body) {
		t.Errorf("%s: message %d: body %q, appended %q: the store kept the caller's body, which aliases a recycled frame", via, i, m.Body, body)
	}
	if got := StripRecordCRC(m.Properties); !maps.Equal(got, props) {
		t.Errorf("%s: message %d: properties %v, appended %v: the store kept the caller's Properties map", via, i, got, props)
	}
	if m.BornTimestamp != 1700000000000 || m.ReconsumeTimes != 2 || m.Flag != 7 {
		t.Errorf("%s: message %d: born %d, reconsume %d, flag %d, appended 1700000000000, 2, 7: the store kept the caller's *message.Ext", via, i, m.BornTimestamp, m.ReconsumeTimes, m.Flag)
	}
}
