package accounts

import (
	"encoding/json"
	"fmt"

	"github.com/google/uuid"

	"gatehouse/actors"
	"gatehouse/wal"
)

// WAL record types of the accounts. The numbers are part of the on-disk
// format (docs/architecture.md lists every domain's): never reuse or
// renumber one.
const (
	recUserPut    wal.Type = 2 // JSON userRecord: full state (create or update)
	recSessionPut wal.Type = 3 // JSON sessionRecord
	recSessionDel wal.Type = 4 // 32-byte session hash
)

// DescribeRecord names the accounts' record types (actors.RecordDescriber),
// for gatehouse repair's report; their identifiers are read from the JSON
// (a session deletion's hash is not shown).
func DescribeRecord(t wal.Type, _ []byte) (name string, ids []string, ok bool) {
	switch t {
	case recUserPut:
		return "user", nil, true
	case recSessionPut:
		return "session", nil, true
	case recSessionDel:
		return "session deleted", []string{}, true
	}
	return "", nil, false
}

var _ actors.RecordDescriber = DescribeRecord

// hash is the SHA-256 of a session token.
type hash [32]byte

// accountsVersion is the version of the user and session records this
// build writes. Records without "v" were written before versions existed
// and are version 1; a higher version is refused (written by a newer build).
const accountsVersion = 1

// userRecord is the durable form of a user (JSON in the WAL and snapshot),
// separate from the exported User.
type userRecord struct {
	V             int       `json:"v,omitempty"`
	ID            uuid.UUID `json:"id"`
	Email         string    `json:"email"`
	Role          Role      `json:"role"`
	Plan          Plan      `json:"plan"`
	LicenseActive bool      `json:"license_active"`
	CreatedAt     int64     `json:"created_at"`
	PasswordHash  string    `json:"password_hash"` // argon2id, encoded
	// KeyRateLimit caps the rate limit of the keys the user creates (0:
	// their plan's); later, optional.
	KeyRateLimit int64 `json:"key_rate_limit,omitempty"`
}

// sessionRecord is the durable form of a session; Hash is SHA-256 of the token.
type sessionRecord struct {
	V         int       `json:"v,omitempty"`
	Hash      hash      `json:"hash"`
	UserID    uuid.UUID `json:"user_id"`
	ExpiresAt int64     `json:"expires_at"`
}

// accountEvent is an event of the accounts domain, applied by
// accountsState.apply.
type accountEvent interface {
	record() wal.Record
}

// userSaved is a user's full new state (create or any change).
type userSaved struct{ u userRecord }

// sessionOpened is a login.
type sessionOpened struct{ s sessionRecord }

// sessionClosed is a logout.
type sessionClosed struct{ hash hash }

func (e userSaved) record() wal.Record {
	u := e.u
	u.V = accountsVersion
	return jsonRecord(recUserPut, u)
}

func (e sessionOpened) record() wal.Record {
	ss := e.s
	ss.V = accountsVersion
	return jsonRecord(recSessionPut, ss)
}

func (e sessionClosed) record() wal.Record {
	return wal.Record{Type: recSessionDel, Data: append([]byte(nil), e.hash[:]...)}
}

// decodeAccountEvent decodes an accounts record (a type Owns claims).
func decodeAccountEvent(r wal.Record) (accountEvent, error) {
	switch r.Type {
	case recUserPut:
		var u userRecord
		if err := decodeVersioned(r.Data, &u, &u.V); err != nil {
			return nil, fmt.Errorf("user record: %w", err)
		}
		return userSaved{u: u}, nil
	case recSessionPut:
		var ss sessionRecord
		if err := decodeVersioned(r.Data, &ss, &ss.V); err != nil {
			return nil, fmt.Errorf("session record: %w", err)
		}
		return sessionOpened{s: ss}, nil
	case recSessionDel:
		var h hash
		if len(r.Data) != len(h) {
			return nil, fmt.Errorf("session delete: %d bytes: %w", len(r.Data), actors.ErrCorrupt)
		}
		copy(h[:], r.Data)
		return sessionClosed{hash: h}, nil
	}
	return nil, fmt.Errorf("record type %d is not the accounts': %w", r.Type, actors.ErrCorrupt)
}

// decodeVersioned unmarshals a JSON record and checks its version field
// (0, absent, means 1).
func decodeVersioned(b []byte, dst any, v *int) error {
	if err := json.Unmarshal(b, dst); err != nil {
		return fmt.Errorf("%w: %w", actors.ErrCorrupt, err)
	}
	if *v == 0 {
		*v = 1
	}
	if *v > accountsVersion {
		return fmt.Errorf("version %d is newer than this build's %d: %w", *v, accountsVersion, actors.ErrCorrupt)
	}
	return nil
}

// jsonUnmarshal is json.Unmarshal, named for the section decoder.
func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }

func jsonRecord(t wal.Type, v any) wal.Record {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("accounts: marshal record type %d: %v", t, err)) // plain structs: cannot fail
	}
	return wal.Record{Type: t, Data: b}
}
