package wal

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strings"

	"go.etcd.io/bbolt"
)

// check is what verify found in the log bucket.
type check struct {
	bad     []BadRecord // in cursor order; stray keys where the cursor met them
	lastKey uint64      // the last sequence present (strays excepted); 0 if none
	stored  uint64      // the meta bucket's last index (0 if metaErr)
	metaErr error       // the meta value is missing its CRC or malformed
}

// prepare runs in one write transaction when Open starts: it creates the
// buckets, verifies every record (envelope, version, CRC, contiguity) and
// makes the stored last index agree with the log when it is unreadable or
// behind a record the log holds. It deletes nothing: bad records are
// returned, and Replay refuses to read past them until Repair has run. The
// transaction is committed only if something changed.
func prepare(db *bbolt.DB, lg *slog.Logger) (check, error) {
	tx, err := db.Begin(true)
	if err != nil {
		return check{}, fmt.Errorf("verify: begin: %w", err)
	}
	defer func() { _ = tx.Rollback() }()

	changed := tx.Bucket(bucketLog) == nil || tx.Bucket(bucketMeta) == nil
	logb, err := tx.CreateBucketIfNotExists(bucketLog)
	if err != nil {
		return check{}, fmt.Errorf("verify: create bucket %s: %w", bucketLog, err)
	}
	meta, err := tx.CreateBucketIfNotExists(bucketMeta)
	if err != nil {
		return check{}, fmt.Errorf("verify: create bucket %s: %w", bucketMeta, err)
	}
	c, err := verify(logb, meta)
	if err != nil {
		return check{}, fmt.Errorf("verify: %w", err)
	}
	if c.metaErr != nil || c.stored < c.lastKey {
		lg.Warn("reset last index", "stored", c.stored, "last_index", c.lastKey, "err", c.metaErr)
		if err := putLast(meta, nil, c.lastKey); err != nil {
			return check{}, fmt.Errorf("verify: put last index: %w", err)
		}
		changed = true
	}
	if !changed {
		return c, nil
	}
	if err := tx.Commit(); err != nil {
		return check{}, fmt.Errorf("verify: commit: %w", err)
	}
	return c, nil
}

// verify checks every entry of the log bucket and reports the bad ones. A
// record of an unknown version with a valid CRC is an error: the log was
// written by a newer build and is neither replayed nor repaired. bbolt
// panics on some damaged pages; that panic becomes an error here.
func verify(logb, meta *bbolt.Bucket) (c check, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("bbolt page damaged (%v): %w", p, ErrCorrupt)
		}
	}()
	c.stored, c.metaErr = getLast(meta)
	hi := uint64(math.MaxUint64)
	cur := logb.Cursor()
	if c.metaErr == nil {
		// A record whose CRC verifies is authentic, key included: one
		// beyond the stored last index raises the bound. Only the keys
		// past it are read, from the end: none in a sound log.
		hi = c.stored
		for k, v := cur.Last(); k != nil; k, v = cur.Prev() {
			if len(k) != 8 || v == nil {
				continue
			}
			seq := binary.BigEndian.Uint64(k)
			if seq <= c.stored {
				break
			}
			if crcValid(seq, v) {
				hi = seq
				break
			}
		}
	}
	var prev uint64
	pos := -1
	for k, v := cur.First(); k != nil; k, v = cur.Next() {
		pos++
		if reason := strayReason(k, v, prev, hi); reason != "" {
			c.bad = append(c.bad, BadRecord{Stray: true, Key: bytes.Clone(k), Type: typeByte(v), Size: len(v), Reason: reason, pos: pos})
			continue
		}
		seq := binary.BigEndian.Uint64(k)
		if prev != 0 && seq > prev+1 {
			c.bad = append(c.bad, BadRecord{Index: prev + 1, Through: seq - 1, Missing: true, Reason: "missing"})
		}
		if _, err := decodeRecord(seq, v); errors.Is(err, ErrUnsupportedVersion) {
			return check{}, err
		} else if err != nil {
			c.bad = append(c.bad, badValue(seq, v, err))
		}
		prev = seq
	}
	c.lastKey = prev
	if prev != 0 && c.metaErr == nil && c.stored > prev {
		// Meta is written with every batch and a truncation leaves the
		// last record: the records after the last one present are gone.
		c.bad = append(c.bad, BadRecord{Index: prev + 1, Through: c.stored, Missing: true,
			Reason: fmt.Sprintf("missing at the end (last index assigned %d)", c.stored)})
	}
	return c, nil
}

// strayReason says why key k (value v) is no record of the log, or "" if
// it is one; prev is the previous sequence accepted, hi the highest the log
// can hold.
func strayReason(k, v []byte, prev, hi uint64) string {
	if len(k) != 8 {
		return fmt.Sprintf("key of %d bytes", len(k))
	}
	if v == nil {
		return "nested bucket"
	}
	seq := binary.BigEndian.Uint64(k)
	switch {
	case seq == 0:
		return "sequence 0"
	case seq <= prev:
		return fmt.Sprintf("sequence %d out of order after %d", seq, prev)
	case seq > hi && !crcValid(seq, v):
		return fmt.Sprintf("sequence %d beyond the last index assigned %d, bad value", seq, hi)
	}
	return ""
}

// crcValid reports whether v, stored at seq, carries its CRC: the record
// was written there, by this version or a newer one.
func crcValid(seq uint64, v []byte) bool {
	_, err := decodeRecord(seq, v)
	return err == nil || errors.Is(err, ErrUnsupportedVersion)
}

// badValue describes the record at seq whose value v failed decodeRecord.
func badValue(seq uint64, v []byte, err error) BadRecord {
	reason := strings.TrimPrefix(err.Error(), fmt.Sprintf("decode index %d: ", seq))
	reason = strings.TrimSuffix(reason, ": "+ErrCorrupt.Error())
	r := BadRecord{Index: seq, Through: seq, Type: typeByte(v), Size: len(v), Reason: reason}
	if len(v) > headerSize {
		r.Payload = bytes.Clone(v[headerSize:])
	}
	return r
}

func typeByte(v []byte) Type {
	if len(v) < 2 {
		return 0
	}
	return Type(v[1])
}
