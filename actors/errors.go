package actors

import "errors"

// Errors returned by System. httpapi maps them to status codes and error
// codes; nothing else in the project does.
var (
	// ErrKeyMissing: no key was presented (MISSING_API_KEY).
	ErrKeyMissing = errors.New("actors: missing api key")
	// ErrKeyInvalid: the presented key is malformed or unknown (INVALID_API_KEY).
	ErrKeyInvalid = errors.New("actors: invalid api key")
	// ErrKeyExpired: the key passed its expiresAt, or an old secret passed its rotation grace (KEY_EXPIRED).
	ErrKeyExpired = errors.New("actors: api key expired")
	// ErrKeyRevoked: the key was revoked (KEY_REVOKED).
	ErrKeyRevoked = errors.New("actors: api key revoked")
	// ErrRateLimited: the key's sliding-window limit is exhausted (RATE_LIMIT_EXCEEDED).
	ErrRateLimited = errors.New("actors: rate limit exceeded")
	// ErrKeyNotFound: no key with that id (404 on management endpoints).
	ErrKeyNotFound = errors.New("actors: key not found")
	// ErrKeyInactive: the operation needs an active key (rotate of a revoked key).
	ErrKeyInactive = errors.New("actors: key is inactive")
	// ErrKeyLimit: the owner holds as many keys as their plan allows.
	ErrKeyLimit = errors.New("actors: key limit of the plan reached")
	// ErrLicenseRequired: the owner has no active license (LICENSE_REQUIRED).
	ErrLicenseRequired = errors.New("actors: active license required")

	// ErrInvalidArgument wraps every validation failure; the wrapping text says which field.
	ErrInvalidArgument = errors.New("actors: invalid argument")
	// ErrUnavailable: the system is shutting down or an actor did not answer in time.
	ErrUnavailable = errors.New("actors: unavailable")
)
