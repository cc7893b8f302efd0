package keys

import "errors"

// Errors returned by Service. httpapi maps them to status codes and error
// codes; nothing else in the project does. Validation failures wrap
// actors.ErrInvalidArgument and a refusal to change anything now (the log
// failed, shutting down, an actor did not answer) actors.ErrUnavailable,
// as in every domain.
var (
	// ErrKeyMissing: no key was presented (MISSING_API_KEY).
	ErrKeyMissing = errors.New("keys: missing api key")
	// ErrKeyInvalid: the presented key is malformed or unknown (INVALID_API_KEY).
	ErrKeyInvalid = errors.New("keys: invalid api key")
	// ErrKeyExpired: the key passed its expiresAt, or an old secret passed its rotation grace (KEY_EXPIRED).
	ErrKeyExpired = errors.New("keys: api key expired")
	// ErrKeyRevoked: the key was revoked (KEY_REVOKED).
	ErrKeyRevoked = errors.New("keys: api key revoked")
	// ErrRateLimited: the key's sliding-window limit is exhausted (RATE_LIMIT_EXCEEDED).
	ErrRateLimited = errors.New("keys: rate limit exceeded")
	// ErrKeyNotFound: no key with that id (404 on management endpoints).
	ErrKeyNotFound = errors.New("keys: key not found")
	// ErrKeyInactive: the operation needs an active key (rotate of a revoked key).
	ErrKeyInactive = errors.New("keys: key is inactive")
	// ErrKeyLimit: the owner holds as many keys as their plan allows.
	ErrKeyLimit = errors.New("keys: key limit of the plan reached")
	// ErrLicenseRequired: the owner has no active license (LICENSE_REQUIRED).
	ErrLicenseRequired = errors.New("keys: active license required")
)
