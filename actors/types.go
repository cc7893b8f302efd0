package actors

import (
	"time"

	"github.com/google/uuid"

	"gatehouse/actors/ratelimit"
)

// Role is a user's role.
type Role string

// Roles.
const (
	RoleUser  Role = "user"
	RoleAdmin Role = "admin"
)

// Valid reports whether r is a known role.
func (r Role) Valid() bool { return r == RoleUser || r == RoleAdmin }

// Plan is a user's plan; it sets the default rate limit of the keys they create.
type Plan string

// Plans.
const (
	PlanStandard Plan = "standard"
	PlanPremium  Plan = "premium"
)

// Valid reports whether p is a known plan.
func (p Plan) Valid() bool { return p == PlanStandard || p == PlanPremium }

// User is a user record as the rest of the program sees it. PasswordHash is
// the encoded argon2id hash; it never leaves the process.
type User struct {
	ID            uuid.UUID
	Email         string
	Role          Role
	Plan          Plan
	LicenseActive bool
	CreatedAt     time.Time
	PasswordHash  string
	// KeyRateLimit is the per-hour limit of keys the user creates (0:
	// their plan's limit): set by an admin on the user, or lowered by an
	// admin's lower limit on one of their keys, which so outlives that key
	// (see UserPatch.KeyRateLimit and KeyRateLimitCap).
	KeyRateLimit int64
}

// NewUser is the input of CreateUser.
type NewUser struct {
	Email         string
	Password      string
	Role          Role // "" means RoleUser
	Plan          Plan // "" means PlanStandard
	LicenseActive bool
}

// UserPatch is the input of UpdateUser; nil fields are left as they are.
type UserPatch struct {
	Plan          *Plan
	LicenseActive *bool
	Role          *Role
	Password      *string
	// KeyRateLimit sets the user's key limit, 0 back to the plan's.
	KeyRateLimit *int64
	// KeyRateLimitCap lowers the user's key limit to it if it is below
	// the limit their new keys get now (KeyRateLimit, else the plan's); a
	// value at or above that changes nothing. An admin's limit on one key
	// sets it: a lower one caps the user's later keys (deleting the key
	// and creating another does not escape it), a higher one is that
	// key's alone. Applied after KeyRateLimit and Plan.
	KeyRateLimitCap *int64
}

// Session is a logged-in session. Token is the raw cookie value, returned
// only by Login; the system keeps only its SHA-256 hash.
type Session struct {
	Token     string
	UserID    uuid.UUID
	ExpiresAt time.Time
}

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

// NewKey is the input of CreateKey.
type NewKey struct {
	Owner     User
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
// ErrUnavailable. Limit carries the rate-limit figures whenever the key was
// found and usable (also with ErrRateLimited).
type AuthResult struct {
	Err      error
	KeyID    uuid.UUID
	UserID   uuid.UUID
	IsActive bool
	Limit    ratelimit.Decision
	// fwd is the key's cluster shard + 1 when this node does not own it
	// and System must forward the admission (cluster mode).
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
