package wal

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"

	"go.etcd.io/bbolt"
)

// Type is a record type, assigned by the caller. 0 is invalid and TypeLost
// is reserved.
type Type uint8

// TypeLost marks a record Repair put in place of one that failed its
// checks or was missing, so the sequence stays contiguous. Replay never
// delivers it and Append refuses it. Its payload is the original's type
// byte (1), its value's length (4, big-endian) and the repair time in Unix
// seconds (8, big-endian); see the package documentation.
const TypeLost Type = 255

// Record is one log entry. Data is opaque to the package.
type Record struct {
	Type Type
	Data []byte
}

const (
	// recordVersion is the envelope version this build writes.
	recordVersion = 1
	// headerSize is version(1) | type(1) | crc32c(4).
	headerSize = 6
	// MaxPayload is the largest Record.Data accepted by Append.
	MaxPayload = bbolt.MaxValueSize - headerSize
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// validate checks what Append accepts, so that one bad call never fails the
// other callers sharing its commit.
func validate(recs []Record) error {
	if len(recs) == 0 {
		return fmt.Errorf("no records: %w", ErrInvalidRecord)
	}
	for i, r := range recs {
		if r.Type == 0 || r.Type == TypeLost {
			return fmt.Errorf("record %d: type %d: %w", i, r.Type, ErrInvalidRecord)
		}
		if len(r.Data) > MaxPayload {
			return fmt.Errorf("record %d: %d-byte payload: %w", i, len(r.Data), ErrInvalidRecord)
		}
	}
	return nil
}

// appendKey appends the big-endian bucket key of seq to dst.
func appendKey(dst []byte, seq uint64) []byte {
	return binary.BigEndian.AppendUint64(dst, seq)
}

// appendRecord appends the envelope of r, stored at seq, to dst.
func appendRecord(dst []byte, seq uint64, r Record) []byte {
	start := len(dst)
	dst = append(dst, recordVersion, byte(r.Type), 0, 0, 0, 0)
	dst = append(dst, r.Data...)
	binary.BigEndian.PutUint32(dst[start+2:], recordCRC(seq, dst[start:]))
	return dst
}

// recordCRC is the CRC-32C of seq (8 bytes, big-endian) || v[0:2] || v[6:],
// that is everything in the envelope but the CRC field, plus the key.
func recordCRC(seq uint64, v []byte) uint32 {
	var key [8]byte
	binary.BigEndian.PutUint64(key[:], seq)
	c := crc32.Update(0, castagnoli, key[:])
	c = crc32.Update(c, castagnoli, v[:2])
	return crc32.Update(c, castagnoli, v[headerSize:])
}

// decodeRecord checks and decodes the envelope v stored at seq. Data aliases
// v (nil when empty): copy it before v's transaction ends. Errors wrap
// ErrCorrupt, or ErrUnsupportedVersion for a well-formed record of a newer
// version.
func decodeRecord(seq uint64, v []byte) (Record, error) {
	if len(v) < headerSize {
		return Record{}, fmt.Errorf("decode index %d: %d-byte value: %w", seq, len(v), ErrCorrupt)
	}
	if got, want := binary.BigEndian.Uint32(v[2:]), recordCRC(seq, v); got != want {
		return Record{}, fmt.Errorf("decode index %d: crc %08x, want %08x: %w", seq, got, want, ErrCorrupt)
	}
	switch {
	case v[0] == 0:
		return Record{}, fmt.Errorf("decode index %d: version 0: %w", seq, ErrCorrupt)
	case v[0] > recordVersion:
		return Record{}, fmt.Errorf("decode index %d: version %d: %w", seq, v[0], ErrUnsupportedVersion)
	case v[1] == 0:
		return Record{}, fmt.Errorf("decode index %d: type 0: %w", seq, ErrCorrupt)
	}
	r := Record{Type: Type(v[1])}
	if len(v) > headerSize {
		r.Data = v[headerSize:]
	}
	return r, nil
}
