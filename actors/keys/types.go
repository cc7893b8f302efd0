package keys

import (
	"time"

	"github.com/google/uuid"

	"gatehouse/actors/ratelimit"
)

// KeyInfo is a read-only view of one API key. Zero times mean null.
type KeyInfo struct {
	ID          uuid.UUID
	Owner       uuid.UUID
	Name        string
	Prefix      string // "svc_live"
	Preview     string // "svc_live_AbCd…wXyZ"
	RateLimit   int64
	IsActive    bool
	RotatedAt   time.Time
	GraceEndsAt time.Time
	LastUsedAt  time.Time
	UsageCount  int64
	ExpiresAt   time.Time
	CreatedAt   time.Time
}

// KeyOwner is what creating a key needs to know of its owner; the
// accounts decide it (accounts.Service.KeyOwner).
type KeyOwner struct {
	ID        uuid.UUID
	Licensed  bool   // else ErrLicenseRequired
	MaxKeys   int    // how many keys they may hold, else ErrKeyLimit
	RateLimit int64  // the per-hour limit of a new key
	Plan      string // named in ErrKeyLimit's message
}

// NewKey is the input of CreateKey.
type NewKey struct {
	Owner     KeyOwner
	Name      string
	ExpiresAt time.Time // zero: never
}

// KeyPatch is the input of UpdateKey; nil fields are left as they are.
// ExpiresAt set to a pointer to the zero time clears the expiry.
type KeyPatch struct {
	RateLimit *int64
	Name      *string
	ExpiresAt *time.Time
}

// AuthResult is the answer to Authorize and Validate. Err is nil, or one of
// ErrKeyMissing, ErrKeyInvalid, ErrKeyExpired, ErrKeyRevoked, ErrRateLimited,
// actors.ErrUnavailable. Limit carries the rate-limit figures whenever the key was
// found and usable (also with ErrRateLimited).
type AuthResult struct {
	Err      error
	KeyID    uuid.UUID
	UserID   uuid.UUID
	IsActive bool
	Limit    ratelimit.Decision
	// fwd is the key's cluster shard + 1 when this node does not own it
	// and Service must forward the admission (cluster mode).
	fwd int32
}

// DayCount is one UTC day of usage.
type DayCount struct {
	Date  string // YYYY-MM-DD
	Count int64
}

// Usage is the answer to KeyUsage.
type Usage struct {
	Daily     []DayCount // oldest first, exactly the requested number of days
	Total     int64
	Limit     int64
	Used      int64
	Remaining int64
	// ResetAt is when the oldest request counted in the window leaves it
	// (zero when the window is empty).
	ResetAt    time.Time
	LastUsedAt time.Time
}
