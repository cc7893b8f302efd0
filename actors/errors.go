package actors

import "errors"

// Errors every domain wraps (each domain's own errors are in its package:
// keys.ErrKeyInvalid, accounts.ErrUserNotFound, ...). httpapi maps them to
// status codes.
var (
	// ErrInvalidArgument wraps every validation failure; the wrapping text says which field.
	ErrInvalidArgument = errors.New("actors: invalid argument")
	// ErrCorrupt marks a record or snapshot payload that does not decode.
	ErrCorrupt = errors.New("actors: corrupt payload")
	// ErrUnavailable: the system is shutting down or an actor did not answer in time.
	ErrUnavailable = errors.New("actors: unavailable")
)
