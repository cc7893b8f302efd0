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
	// ErrUnavailable: the bytes cannot be kept or found where they must be
	// now, and retrying later may help. Store never returns it; a store
	// built over it does (in cluster mode, package replica: no other node
	// took a copy of a Put, or none could be asked for a missing blob).
	ErrUnavailable = errors.New("blob: unavailable")
)
