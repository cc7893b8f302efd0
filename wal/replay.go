package wal

import (
	"encoding/binary"
	"fmt"
	"math"

	"go.etcd.io/bbolt"
)

const (
	// replayChunkRecords and replayChunkBytes bound one read transaction of
	// Replay, so fn never runs inside a transaction and read transactions
	// stay short.
	replayChunkRecords = 1024
	replayChunkBytes   = 1 << 20
)

type entry struct {
	seq uint64
	rec Record
}

// Replay calls fn for every record with sequence > after, in order, including
// records appended while it runs. fn may keep rec.Data. It returns fn's
// error wrapped with the sequence, ErrCompacted if some record > after was
// already deleted by TruncateBefore, or ErrCorrupt.
func (l *Log) Replay(after uint64, fn func(seq uint64, rec Record) error) error {
	if after == math.MaxUint64 {
		return nil
	}
	next := after + 1
	for {
		chunk, err := l.readChunk(next)
		if err != nil {
			return fmt.Errorf("replay after %d: %w", after, err)
		}
		if len(chunk) == 0 {
			return nil
		}
		for _, e := range chunk {
			if err := fn(e.seq, e.rec); err != nil {
				return fmt.Errorf("replay index %d: %w", e.seq, err)
			}
		}
		last := chunk[len(chunk)-1].seq
		if last == math.MaxUint64 {
			return nil
		}
		next = last + 1
	}
}

// readChunk reads up to one chunk of records starting exactly at from.
func (l *Log) readChunk(from uint64) ([]entry, error) {
	var chunk []entry
	err := l.view(func(tx *bbolt.Tx) error {
		c := tx.Bucket(bucketLog).Cursor()
		k, v := c.Seek(appendKey(nil, from))
		if k == nil {
			last, err := getLast(tx.Bucket(bucketMeta))
			if err != nil {
				return err
			}
			if last >= from {
				return fmt.Errorf("index %d: %w", from, ErrCompacted)
			}
			return nil
		}
		if len(k) == 8 && binary.BigEndian.Uint64(k) > from {
			return fmt.Errorf("index %d: first present %d: %w", from, binary.BigEndian.Uint64(k), ErrCompacted)
		}
		var data []byte // one copy per chunk; fn may keep slices of it
		for seq := from; k != nil && len(chunk) < replayChunkRecords && len(data) < replayChunkBytes; seq++ {
			if len(k) != 8 || binary.BigEndian.Uint64(k) != seq {
				return fmt.Errorf("index %d: found key %x: %w", seq, k, ErrCorrupt)
			}
			rec, err := decodeRecord(seq, v)
			if err != nil {
				return err
			}
			if rec.Data != nil {
				start := len(data)
				data = append(data, rec.Data...)
				rec.Data = data[start:len(data):len(data)]
			}
			chunk = append(chunk, entry{seq: seq, rec: rec})
			k, v = c.Next()
		}
		return nil
	})
	return chunk, err
}
