package accounts

import (
	"encoding/base64"
	"fmt"
	"strings"

	"github.com/google/uuid"

	"gatehouse/actors"
)

// Password hashes are sealed like the other stored secrets: a user
// record (in the WAL, the replicated log in etcd, snapshots and memory)
// holds sealedHashPrefix and the base64 of the argon2id PHC string sealed
// with the master key (AES-256-GCM, Sealer), bound to the user's id, so a
// reader of the records without the master key (an etcd operator, a copy
// of wal.db) gets no hash to crack offline, and a hash copied onto
// another user does not open. A hash without the prefix was written
// before hashes were sealed: it is used as it is, and sealed when the
// password next changes.
const sealedHashPrefix = "sealed1:"

// passwordAAD binds a sealed hash to its user.
func passwordAAD(id uuid.UUID) []byte { return append([]byte("user-password/"), id[:]...) }

// sealPasswordHash seals phc, the PHC string of user id's password.
func (s *Service) sealPasswordHash(phc string, id uuid.UUID) (string, error) {
	b, err := s.sealer.Seal([]byte(phc), passwordAAD(id))
	if err != nil {
		return "", fmt.Errorf("seal password hash: %w", err)
	}
	return sealedHashPrefix + base64.RawStdEncoding.EncodeToString(b), nil
}

// openPasswordHash returns the PHC string of user id's stored hash (as
// it is when written before hashes were sealed).
func (s *Service) openPasswordHash(stored string, id uuid.UUID) (string, error) {
	rest, sealed := strings.CutPrefix(stored, sealedHashPrefix)
	if !sealed {
		return stored, nil
	}
	b, err := base64.RawStdEncoding.DecodeString(rest)
	if err != nil {
		return "", fmt.Errorf("open password hash: %w: %w", actors.ErrCorrupt, err)
	}
	phc, err := s.sealer.Open(b, passwordAAD(id))
	if err != nil {
		return "", fmt.Errorf("open password hash: %w", err)
	}
	return string(phc), nil
}
