package wal

import "errors"

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
