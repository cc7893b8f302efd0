package gateway

import "errors"

// Errors returned by Gateway. httpapi maps them to the gateway's error
// codes; nothing else does.
var (
	// ErrKeyMissing: no token was presented.
	ErrKeyMissing = errors.New("gateway: missing token")
	// ErrKeyInvalid: the token is malformed, unknown, revoked or expired.
	ErrKeyInvalid = errors.New("gateway: invalid token")
	// ErrNotFound: no such API key, provider or agent.
	ErrNotFound = errors.New("gateway: not found")
	// ErrExists: the name or agent_key is taken.
	ErrExists = errors.New("gateway: already exists")
	// ErrForbidden: the user does not own the agent.
	ErrForbidden = errors.New("gateway: not the owner")
	// ErrInUse: the provider is still used by an agent.
	ErrInUse = errors.New("gateway: still in use")
	// ErrDisabled: the feature is turned off in the configuration.
	ErrDisabled = errors.New("gateway: disabled by configuration")
	// ErrQuota: a per-user cap (Config.Quotas) would be exceeded; the
	// text names the cap. Not a rate limit: retrying does not help until
	// something is deleted or the cap raised.
	ErrQuota = errors.New("gateway: quota exceeded")
	// ErrTooLarge: an upload over its limit.
	ErrTooLarge = errors.New("gateway: too large")
	// ErrInvalid wraps every validation failure; the text names the field.
	ErrInvalid = errors.New("gateway: invalid argument")
)
