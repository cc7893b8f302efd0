package snapshot

import "errors"

// Errors returned by Store. Wrapped errors add the operation and the file
// name or index; check them with errors.Is.
var (
	// ErrNoSnapshot: Load found no valid snapshot (an empty directory, or
	// every snapshot in it was set aside as broken).
	ErrNoSnapshot = errors.New("snapshot: no snapshot")
	// ErrCorrupt: a snapshot file failed validation. Load never returns it:
	// it sets the file aside and tries the next older one. The function
	// passed to Load returns an error wrapping ErrCorrupt to report a payload
	// it cannot decode.
	ErrCorrupt = errors.New("snapshot: corrupt")
)
