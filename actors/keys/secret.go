package keys

import (
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"gatehouse/actors"
)

// Key format: KeyPrefix + "_" + keyRandLen characters of keyAlphabet.
const (
	KeyPrefix   = "svc_live"
	keyRandLen  = 32
	keyAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	keyLen      = len(KeyPrefix) + 1 + keyRandLen
)

// hash is the SHA-256 of a full secret: the only form used for lookups.
type hash [32]byte

// newSecret draws a fresh key from crypto/rand without modulo bias.
func newSecret() (string, error) {
	out := make([]byte, 0, keyLen)
	out = append(out, KeyPrefix...)
	out = append(out, '_')
	var buf [64]byte
	for len(out) < keyLen {
		if _, err := rand.Read(buf[:]); err != nil {
			return "", fmt.Errorf("draw key: %w", err)
		}
		for _, b := range buf {
			// 248 = 4*62: reject the top bytes so every character is equally likely.
			if b < 248 && len(out) < keyLen {
				out = append(out, keyAlphabet[b%62])
			}
		}
	}
	return string(out), nil
}

// wellFormed reports whether b has the shape of a key; it never allocates.
// A table says which bytes are in keyAlphabet: random characters made
// the three range tests' branches mispredict (issue 35: ~0.1 µs a call).
func wellFormed(b []byte) bool {
	if len(b) != keyLen || string(b[:len(KeyPrefix)+1]) != KeyPrefix+"_" {
		return false
	}
	for _, c := range b[len(KeyPrefix)+1:] {
		if !inKeyAlphabet[c] {
			return false
		}
	}
	return true
}

var inKeyAlphabet = func() (t [256]bool) {
	for i := range len(keyAlphabet) {
		t[keyAlphabet[i]] = true
	}
	return t
}()

// previewChars are the first and last 4 random characters of a secret:
// all a key keeps of it in the clear, to show it masked.
type previewChars [8]byte

func previewOf(secret string) previewChars {
	r := secret[len(KeyPrefix)+1:]
	var p previewChars
	copy(p[:4], r[:4])
	copy(p[4:], r[len(r)-4:])
	return p
}

// String renders the masked key, e.g. "svc_live_AbCd…wXyZ".
func (p previewChars) String() string {
	return KeyPrefix + "_" + string(p[:4]) + "…" + string(p[4:])
}

// sealedLen is the size of a sealed secret: nonce, ciphertext, GCM tag.
const sealedLen = 12 + keyLen + 16

// sealedKey is a secret sealed by Sealer.SealKey, kept inline (no pointer).
type sealedKey [sealedLen]byte

// sealKey seals a full secret bound to its key id.
func sealKey(s *actors.Sealer, secret string, id []byte) (sealedKey, error) {
	var out sealedKey
	b, err := s.Seal([]byte(secret), id)
	if err != nil {
		return out, err
	}
	if len(b) != sealedLen {
		return out, errors.New("keys: sealed key has an unexpected size")
	}
	copy(out[:], b)
	return out, nil
}

// hashOf hashes a secret without allocating.
func hashOf(b []byte) hash { return sha256.Sum256(b) }

// shardOfHash picks the shard that indexes a secret hash.
func shardOfHash(h hash, n int) int {
	return int(uint64(h[0])<<24|uint64(h[1])<<16|uint64(h[2])<<8|uint64(h[3])) % n
}
