package blob

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
)

// Ref names a blob: the SHA-256 of its bytes. The zero Ref names nothing.
// Refs are comparable and serve as map keys; as text (String, JSON) they
// are 64 lowercase hex characters.
type Ref [sha256.Size]byte

// String returns the ref as 64 lowercase hex characters.
func (r Ref) String() string { return hex.EncodeToString(r[:]) }

// IsZero reports whether r is the zero Ref.
func (r Ref) IsZero() bool { return r == Ref{} }

// MarshalText returns String's form, so that a Ref in a JSON record or API
// view is a hex string rather than an array of numbers.
func (r Ref) MarshalText() ([]byte, error) {
	b := make([]byte, hex.EncodedLen(len(r)))
	hex.Encode(b, r[:])
	return b, nil
}

// UnmarshalText parses what MarshalText returns; see ParseRef.
func (r *Ref) UnmarshalText(b []byte) error {
	ref, err := parseRef(b)
	if err != nil {
		return err
	}
	*r = ref
	return nil
}

// ParseRef parses the form String returns: exactly 64 lowercase hex
// characters, so that each Ref has one text form. Anything else returns an
// error wrapping ErrCorrupt. It never panics.
func ParseRef(s string) (Ref, error) { return parseRef([]byte(s)) }

func parseRef(b []byte) (Ref, error) {
	var r Ref
	if len(b) != hex.EncodedLen(len(r)) {
		return Ref{}, fmt.Errorf("parse ref: %d characters, want %d: %w", len(b), hex.EncodedLen(len(r)), ErrCorrupt)
	}
	for i, c := range b {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return Ref{}, fmt.Errorf("parse ref: character %d is %q, want 0-9 or a-f: %w", i, c, ErrCorrupt)
		}
	}
	if _, err := hex.Decode(r[:], b); err != nil { // cannot fail after the loop
		return Ref{}, fmt.Errorf("parse ref: %w", ErrCorrupt)
	}
	return r, nil
}
