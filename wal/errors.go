package wal

import (
	"errors"
	"fmt"
)

// The package prefix lives only in these sentinels; wrapping errors add the
// operation and the identifiers ("decode index 7: wal: corrupt record").
var (
	// ErrCorrupt means a stored record failed its envelope, version, type,
	// CRC or contiguity check.
	ErrCorrupt = errors.New("wal: corrupt record")

	// ErrClosed is returned by every method called after Close.
	ErrClosed = errors.New("wal: closed")

	// ErrInvalidRecord is returned by Append and AppendAsync for an empty
	// call, a record of Type 0 or a payload larger than MaxPayload.
	ErrInvalidRecord = errors.New("wal: invalid record")

	// ErrUnsupportedVersion means a record carries a valid CRC but an
	// envelope version this build does not know (written by a newer build).
	// Open refuses such a log instead of cutting it.
	ErrUnsupportedVersion = errors.New("wal: unsupported record version")

	// ErrCompacted is returned by Replay when records it would have to
	// deliver were already deleted by TruncateBefore.
	ErrCompacted = errors.New("wal: records compacted")

	// ErrOutOfRange is returned by TruncateBefore for a sequence beyond
	// LastIndex()+1.
	ErrOutOfRange = errors.New("wal: index out of range")

	// ErrFailed: a commit failed to reach the disk (a write or fsync
	// error, a full disk). The log is then fail-stop: every later write
	// returns ErrFailed until the process reopens it, because after a
	// failed fsync the kernel may have dropped the dirty pages and a retry
	// can report success for data that is gone (the PostgreSQL and etcd
	// fsync lessons). Commits acknowledged before the failure are on disk;
	// the failed batch was never acknowledged.
	ErrFailed = errors.New("wal: failed, restart to recover")

	// ErrNotEmpty is returned by SetNext when the log holds records.
	ErrNotEmpty = errors.New("wal: log not empty")
)

// BadRecord is one entry of the log bucket that failed its checks when the
// log was opened: a record whose envelope does not verify, records missing
// from the sequence, or a key that is no sequence of the log (a stray key).
type BadRecord struct {
	// Index is the record's sequence; for missing records the first one
	// missing; 0 for a stray key (see Key).
	Index uint64
	// Through is the last missing sequence when Missing (Index..Through);
	// Index otherwise.
	Through uint64
	// Missing: the sequences Index..Through are absent from the log.
	Missing bool
	// Stray: Key is no record of the log (not 8 bytes, sequence 0, out of
	// order, a nested bucket, or a bad value beyond the last sequence ever
	// assigned); Repair deletes it, nothing is lost.
	Stray bool
	// Key is the raw bucket key (set for stray keys).
	Key []byte
	// Type is byte 1 of the stored value, as stored (it may be the damaged
	// byte itself); 0 if the value is shorter.
	Type Type
	// Size is the stored value's length in bytes (envelope included).
	Size int
	// Payload is the stored payload (bytes 6.. of the value), unverified:
	// for the caller to describe what was lost. String and
	// CorruptError.Error never print it.
	Payload []byte
	// Reason says which check failed.
	Reason string

	pos int // a stray key's position in cursor order, for Repair
}

// String describes r without its payload: "index 7 (type 2, 160 bytes): crc
// 1a2b3c4d, want 5e6f7a8b".
func (r BadRecord) String() string {
	switch {
	case r.Missing && r.Through > r.Index:
		return fmt.Sprintf("indexes %d-%d: %s", r.Index, r.Through, r.Reason)
	case r.Missing:
		return fmt.Sprintf("index %d: %s", r.Index, r.Reason)
	case r.Stray:
		return fmt.Sprintf("key %x (%d-byte value): %s", r.Key, r.Size, r.Reason)
	}
	return fmt.Sprintf("index %d (type %d, %d bytes): %s", r.Index, r.Type, r.Size, r.Reason)
}

// CorruptError lists the bad entries Open found in the log. Replay returns
// it (it wraps ErrCorrupt) instead of reading past one of them; Repair
// replaces them. A log whose records all verify never returns it.
type CorruptError struct {
	Path string
	Bad  []BadRecord
}

// Error names the first bad entry and how many others there are.
func (e *CorruptError) Error() string {
	if len(e.Bad) == 0 {
		return fmt.Sprintf("%s: %v", e.Path, ErrCorrupt)
	}
	more := ""
	if n := len(e.Bad) - 1; n > 0 {
		more = fmt.Sprintf(" (and %d more)", n)
	}
	return fmt.Sprintf("%s: %s%s: %v", e.Path, e.Bad[0], more, ErrCorrupt)
}

// Unwrap makes errors.Is(err, ErrCorrupt) hold.
func (e *CorruptError) Unwrap() error { return ErrCorrupt }
