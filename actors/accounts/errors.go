package accounts

import "errors"

// Errors of the accounts. httpapi maps them to status codes and error
// codes; nothing else in the project does. Validation failures wrap
// actors.ErrInvalidArgument, and an actor that does not answer in time
// actors.ErrUnavailable, as every domain's do.
var (
	// ErrUserNotFound: no user with that id.
	ErrUserNotFound = errors.New("accounts: user not found")
	// ErrEmailTaken: another user has that email.
	ErrEmailTaken = errors.New("accounts: email already registered")
	// ErrBadCredentials: unknown email or wrong password.
	ErrBadCredentials = errors.New("accounts: invalid credentials")
	// ErrSessionInvalid: unknown or expired session token.
	ErrSessionInvalid = errors.New("accounts: invalid session")
)
