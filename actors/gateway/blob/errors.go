package blob

import "errors"

// Errors returned by Store.
var (
	// ErrNotFound: no blob with that ref.
	ErrNotFound = errors.New("blob: not found")
	// ErrCorrupt: the blob's bytes do not match its ref, or a ref string is
	// malformed.
	ErrCorrupt = errors.New("blob: corrupt")
	// ErrTooLarge: Put's input exceeds its limit; nothing was stored.
	ErrTooLarge = errors.New("blob: too large")
)
