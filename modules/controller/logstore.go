package controller

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/go-msgpack/v2/codec"
	"github.com/hashicorp/raft"
	bolt "go.etcd.io/bbolt"
)

// boltStore is raft's LogStore and StableStore on a bbolt file, in the
// layout github.com/hashicorp/raft-boltdb uses (buckets "logs" and "conf",
// big-endian uint64 keys, msgpack-encoded logs), so controllers' existing
// raft.db files open unchanged. It replaces raft-boltdb/v2, which also
// links the unmaintained github.com/boltdb/bolt (for its v1 migration)
// and so does not build on 32-bit MIPS, an edge target.
type boltStore struct {
	db *bolt.DB
}

var (
	bucketLogs = []byte("logs")
	bucketConf = []byte("conf")

	errKeyNotFound = errors.New("not found")
)

var _ raft.LogStore = (*boltStore)(nil)
var _ raft.StableStore = (*boltStore)(nil)

func openBoltStore(path string) (*boltStore, error) {
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: 5 * time.Second})
	if err != nil {
		return nil, fmt.Errorf("controller: open raft log %s: %w", path, err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		if _, err := tx.CreateBucketIfNotExists(bucketLogs); err != nil {
			return err
		}
		_, err := tx.CreateBucketIfNotExists(bucketConf)
		return err
	})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("controller: init raft log %s: %w", path, err)
	}
	return &boltStore{db: db}, nil
}

func (s *boltStore) Close() error { return s.db.Close() }

func key(u uint64) []byte {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], u)
	return b[:]
}

// msgpackHandle encodes time as raft-boltdb does by default (not as the
// msgpack time extension), so logs written by either read back.
func msgpackHandle() *codec.MsgpackHandle {
	h := &codec.MsgpackHandle{}
	h.TimeNotBuiltin = true
	return h
}

func (s *boltStore) FirstIndex() (uint64, error) {
	var idx uint64
	err := s.db.View(func(tx *bolt.Tx) error {
		if k, _ := tx.Bucket(bucketLogs).Cursor().First(); k != nil {
			idx = binary.BigEndian.Uint64(k)
		}
		return nil
	})
	return idx, err
}

func (s *boltStore) LastIndex() (uint64, error) {
	var idx uint64
	err := s.db.View(func(tx *bolt.Tx) error {
		if k, _ := tx.Bucket(bucketLogs).Cursor().Last(); k != nil {
			idx = binary.BigEndian.Uint64(k)
		}
		return nil
	})
	return idx, err
}

func (s *boltStore) GetLog(idx uint64, log *raft.Log) error {
	return s.db.View(func(tx *bolt.Tx) error {
		v := tx.Bucket(bucketLogs).Get(key(idx))
		if v == nil {
			return raft.ErrLogNotFound
		}
		if err := codec.NewDecoder(bytes.NewReader(v), msgpackHandle()).Decode(log); err != nil {
			return fmt.Errorf("controller: raft log %d: %w", idx, err)
		}
		return nil
	})
}

func (s *boltStore) StoreLog(log *raft.Log) error { return s.StoreLogs([]*raft.Log{log}) }

func (s *boltStore) StoreLogs(logs []*raft.Log) error {
	return s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketLogs)
		for _, l := range logs {
			var buf bytes.Buffer
			if err := codec.NewEncoder(&buf, msgpackHandle()).Encode(l); err != nil {
				return fmt.Errorf("controller: encode raft log %d: %w", l.Index, err)
			}
			if err := b.Put(key(l.Index), buf.Bytes()); err != nil {
				return err
			}
		}
		return nil
	})
}

func (s *boltStore) DeleteRange(min, max uint64) error {
	return s.db.Update(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketLogs).Cursor()
		for k, _ := c.Seek(key(min)); k != nil; k, _ = c.Next() {
			if binary.BigEndian.Uint64(k) > max {
				break
			}
			if err := c.Delete(); err != nil {
				return err
			}
		}
		return nil
	})
}

func (s *boltStore) Set(k, v []byte) error {
	return s.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketConf).Put(k, v) })
}

func (s *boltStore) Get(k []byte) ([]byte, error) {
	var out []byte
	err := s.db.View(func(tx *bolt.Tx) error {
		v := tx.Bucket(bucketConf).Get(k)
		if v == nil {
			return errKeyNotFound
		}
		out = append([]byte(nil), v...)
		return nil
	})
	return out, err
}

func (s *boltStore) SetUint64(k []byte, v uint64) error { return s.Set(k, key(v)) }

func (s *boltStore) GetUint64(k []byte) (uint64, error) {
	v, err := s.Get(k)
	if err != nil {
		return 0, err
	}
	if len(v) != 8 {
		return 0, fmt.Errorf("controller: raft stable key %q: %d bytes, want 8", k, len(v))
	}
	return binary.BigEndian.Uint64(v), nil
}
