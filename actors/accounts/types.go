package accounts

import (
	"time"

	"github.com/google/uuid"
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
