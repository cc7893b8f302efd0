package blob

import (
	"encoding/hex"
	"fmt"
)

// Ref names a blob: the SHA-256 of its bytes.
type Ref [32]byte

// String is the ref as 64 lowercase hex characters.
func (r Ref) String() string { return hex.EncodeToString(r[:]) }

// IsZero reports whether r is the zero Ref (names nothing).
func (r Ref) IsZero() bool { return r == Ref{} }

// ParseRef parses 64 hex characters (either case). Anything else is an
// error wrapping ErrCorrupt.
func ParseRef(s string) (Ref, error) {
	var r Ref
	if len(s) != 2*len(r) {
		return Ref{}, fmt.Errorf("parse ref: %d characters, want %d: %w", len(s), 2*len(r), ErrCorrupt)
	}
	if _, err := hex.Decode(r[:], []byte(s)); err != nil {
		return Ref{}, fmt.Errorf("parse ref: %w", ErrCorrupt)
	}
	return r, nil
}
