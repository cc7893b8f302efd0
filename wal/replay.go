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
// records appended while it runs, except TypeLost records. fn may keep
// rec.Data. It returns fn's error wrapped with the sequence, ErrCompacted if
// some record > after was already deleted by TruncateBefore, a *CorruptError
// before calling fn at all if Open found a bad entry > after (or a stray
// key), or ErrCorrupt for damage found on the way.
func (l *Log) Replay(after uint64, fn func(seq uint64, rec Record) error) error {
	if after == math.MaxUint64 {
		return nil
	}
	if err := l.corruptAfter(after); err != nil {
		return fmt.Errorf("replay after %d: %w", after, err)
	}
	next := after + 1
	for {
		chunk, last, err := l.readChunk(next)
		if err != nil {
			return fmt.Errorf("replay after %d: %w", after, err)
		}
		if last == 0 {
			return nil
		}
		for _, e := range chunk {
			if err := fn(e.seq, e.rec); err != nil {
				return fmt.Errorf("replay index %d: %w", e.seq, err)
			}
		}
		if last == math.MaxUint64 {
			return nil
		}
		next = last + 1
	}
}

// readChunk reads up to one chunk of records starting exactly at from, and
// returns them without the TypeLost ones and the last sequence read (0 if
// none).
func (l *Log) readChunk(from uint64) (chunk []entry, last uint64, err error) {
	err = l.view(func(tx *bbolt.Tx) error {
		c := tx.Bucket(bucketLog).Cursor()
		k, v := c.Seek(appendKey(nil, from))
		if k == nil {
			assigned, gerr := getLast(tx.Bucket(bucketMeta))
			if gerr != nil {
				return gerr
			}
			if assigned >= from {
				return fmt.Errorf("index %d: %w", from, ErrCompacted)
			}
			return nil
		}
		if len(k) == 8 && binary.BigEndian.Uint64(k) > from {
			return fmt.Errorf("index %d: first present %d: %w", from, binary.BigEndian.Uint64(k), ErrCompacted)
		}
		var data []byte // one copy per chunk; fn may keep slices of it
		for seq := from; k != nil && seq-from < replayChunkRecords && len(data) < replayChunkBytes; seq++ {
			if len(k) != 8 || binary.BigEndian.Uint64(k) != seq {
				return fmt.Errorf("index %d: found key %x: %w", seq, k, ErrCorrupt)
			}
			rec, derr := decodeRecord(seq, v)
			if derr != nil {
				return derr
			}
			last = seq
			if rec.Type == TypeLost {
				k, v = c.Next()
				continue
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
	if err != nil {
		return nil, 0, err
	}
	return chunk, last, nil
}
