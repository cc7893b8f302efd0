package blob

import "errors"

// Errors returned by Store and ParseRef. Wrapped errors add the operation
// and the ref; check them with errors.Is.
var (
	// ErrNotFound: no blob with that ref is stored (never put, or
	// collected).
	ErrNotFound = errors.New("blob: not found")
	// ErrCorrupt: a stored blob's bytes do not hash to its ref (bit rot,
	// truncation, a foreign file at its address), or a ref string is
	// malformed.
	ErrCorrupt = errors.New("blob: corrupt")
	// ErrTooLarge: Put's input is longer than its limit; nothing was stored.
	ErrTooLarge = errors.New("blob: too large")
)
