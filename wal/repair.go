package wal

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"

	"go.etcd.io/bbolt"
)

// scan is what scanLog found in the log bucket.
type scan struct {
	lastGood uint64 // sequence of the last good record; 0 if none
	cutFrom  []byte // key of the first bad record; nil if all are good
	cutTo    []byte // last key in the bucket when cutFrom != nil
	cutN     int    // keys from cutFrom to the end
	cutErr   error  // why cutFrom is bad
}

// repair runs in one write transaction when Open starts: it creates the
// buckets, verifies every record (envelope, version, CRC, contiguity), cuts
// the log at the last good record and makes the stored last index agree with
// the log. The transaction is committed only if something changed.
func repair(db *bbolt.DB, lg *slog.Logger, m *metrics) error {
	tx, err := db.Begin(true)
	if err != nil {
		return fmt.Errorf("repair: begin: %w", err)
	}
	defer func() { _ = tx.Rollback() }()

	changed := tx.Bucket(bucketLog) == nil || tx.Bucket(bucketMeta) == nil
	logb, err := tx.CreateBucketIfNotExists(bucketLog)
	if err != nil {
		return fmt.Errorf("repair: create bucket %s: %w", bucketLog, err)
	}
	meta, err := tx.CreateBucketIfNotExists(bucketMeta)
	if err != nil {
		return fmt.Errorf("repair: create bucket %s: %w", bucketMeta, err)
	}
	s, err := scanLog(logb)
	if err != nil {
		return fmt.Errorf("repair: %w", err)
	}
	stored, metaErr := getLast(meta)
	want := s.last(stored)
	if s.cutFrom != nil {
		if err := cut(logb, s.cutFrom); err != nil {
			return fmt.Errorf("repair: cut from key %x: %w", s.cutFrom, err)
		}
		lg.Warn("cut corrupt tail",
			keyAttr("from", s.cutFrom), keyAttr("to", s.cutTo),
			"records", s.cutN, "last_good", s.lastGood, "next_index", want+1, "err", s.cutErr)
		m.repaired.Add(float64(s.cutN))
		changed = true
	} else if metaErr != nil || stored != want {
		lg.Warn("reset last index", "stored", stored, "last_index", want, "err", metaErr)
	}
	if metaErr != nil || stored != want {
		if err := putLast(meta, nil, want); err != nil {
			return fmt.Errorf("repair: put last index: %w", err)
		}
		changed = true
	}
	if !changed {
		return nil
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("repair: commit: %w", err)
	}
	return nil
}

// last is the last index after the cut, given the stored one: the last good
// record if any remain, else the record before the first cut one, else (the
// log was empty before repair) the stored value.
func (s scan) last(stored uint64) uint64 {
	switch {
	case s.lastGood != 0:
		return s.lastGood
	case len(s.cutFrom) == 8 && binary.BigEndian.Uint64(s.cutFrom) != 0:
		return binary.BigEndian.Uint64(s.cutFrom) - 1
	default:
		return stored
	}
}

// scanLog verifies every record in order and stops at the first bad one. A
// record of an unknown version with a valid CRC is an error: the log was
// written by a newer build and must not be cut.
func scanLog(b *bbolt.Bucket) (scan, error) {
	var s scan
	c := b.Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		err := checkEntry(k, v, s.lastGood)
		if errors.Is(err, ErrUnsupportedVersion) {
			return s, err
		}
		if err == nil {
			s.lastGood = binary.BigEndian.Uint64(k)
			continue
		}
		s.cutFrom, s.cutErr = bytes.Clone(k), err
		for ; k != nil; k, _ = c.Next() {
			s.cutN++
			s.cutTo = k
		}
		s.cutTo = bytes.Clone(s.cutTo)
		return s, nil
	}
	return s, nil
}

// checkEntry verifies one key/value pair; prev is the previous good sequence
// (0 for the first record).
func checkEntry(k, v []byte, prev uint64) error {
	if len(k) != 8 {
		return fmt.Errorf("key %x: %d bytes: %w", k, len(k), ErrCorrupt)
	}
	seq := binary.BigEndian.Uint64(k)
	switch {
	case seq == 0:
		return fmt.Errorf("index 0: %w", ErrCorrupt)
	case prev != 0 && seq != prev+1:
		return fmt.Errorf("index %d after %d: gap: %w", seq, prev, ErrCorrupt)
	case v == nil:
		return fmt.Errorf("index %d: nested bucket: %w", seq, ErrCorrupt)
	}
	_, err := decodeRecord(seq, v)
	return err
}

// cut deletes every key >= from.
func cut(b *bbolt.Bucket, from []byte) error {
	c := b.Cursor()
	// Seek again after each Delete: Next after Delete skips a key.
	for k, v := c.Seek(from); k != nil; k, v = c.Seek(from) {
		var err error
		if v == nil {
			err = b.DeleteBucket(k)
		} else {
			err = c.Delete()
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// keyAttr logs a key as its sequence, or in hex if it is not 8 bytes long.
func keyAttr(name string, k []byte) slog.Attr {
	if len(k) == 8 {
		return slog.Uint64(name, binary.BigEndian.Uint64(k))
	}
	return slog.String(name, fmt.Sprintf("%x", k))
}
