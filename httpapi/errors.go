package httpapi

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/valyala/fasthttp"

	"gatehouse/actors"
	"gatehouse/actors/accounts"
	"gatehouse/actors/control"
	"gatehouse/actors/keys"
	"gatehouse/actors/ratelimit"
	"gatehouse/httpapi/listener"
	"gatehouse/httpapi/relay"
)

// This file is the only place where errors become HTTP statuses and error
// codes. Handlers return errors; the route wrapper hands them to writeError.

// Error codes of the management API and the proxy (see doc.go for the table).
const (
	codeMissingKey       = "MISSING_API_KEY"
	codeInvalidKey       = "INVALID_API_KEY"
	codeKeyExpired       = "KEY_EXPIRED"
	codeKeyRevoked       = "KEY_REVOKED"
	codeLicenseRequired  = "LICENSE_REQUIRED"
	codeRateLimited      = "RATE_LIMIT_EXCEEDED"
	codeInvalidPath      = "INVALID_PATH"
	codeKeyLimit         = "KEY_LIMIT_REACHED"
	codeUnknownService   = "UNKNOWN_SERVICE"
	codeKeyNotFound      = "KEY_NOT_FOUND"
	codeKeyInactive      = "KEY_INACTIVE"
	codeUnauthorized     = "UNAUTHORIZED"
	codeForbidden        = "FORBIDDEN"
	codeNotFound         = "NOT_FOUND"
	codeMethodNotAllowed = "METHOD_NOT_ALLOWED"
	codeInvalidCreds     = "INVALID_CREDENTIALS"
	codeEmailTaken       = "EMAIL_TAKEN"
	codeValidation       = "VALIDATION_ERROR"
	codeInvalidJSON      = "INVALID_JSON"
	codeTooLarge         = "PAYLOAD_TOO_LARGE"
	codeCSRF             = "CSRF_REJECTED"
	codeBadRequest       = "BAD_REQUEST"
	codeRequestTimeout   = "REQUEST_TIMEOUT"
	codeUpstreamDown     = "UPSTREAM_UNAVAILABLE"
	codeUpstreamTimeout  = "UPSTREAM_TIMEOUT"
	codeUnavailable      = "UNAVAILABLE"
	codeInternal         = "INTERNAL"
	// Access tokens and services (issue 23).
	codeInvalidToken      = "INVALID_TOKEN"
	codeTokenExpired      = "TOKEN_EXPIRED"
	codeInsufficientScope = "INSUFFICIENT_SCOPE"
	codeTokenNotFound     = "TOKEN_NOT_FOUND"
	codeServiceNotFound   = "SERVICE_NOT_FOUND"
	codeServiceExists     = "SERVICE_EXISTS"
	codeServiceReadOnly   = "SERVICE_READ_ONLY"
	codeServiceNotAllowed = "SERVICE_NOT_ALLOWED"
	codeServiceDisabled   = "SERVICE_DISABLED"
)

// apiError is an error that already knows its status and code. Handlers
// build them only through the constructors below.
type apiError struct {
	status int
	code   string
	msg    string
}

func (e *apiError) Error() string { return e.code + ": " + e.msg }

// Errors raised by the HTTP layer itself.
var (
	errUnauthorized     = &apiError{fasthttp.StatusUnauthorized, codeUnauthorized, "login required"}
	errForbidden        = &apiError{fasthttp.StatusForbidden, codeForbidden, "admin role required"}
	errNotFound         = &apiError{fasthttp.StatusNotFound, codeNotFound, "not found"}
	errKeyNotFound      = &apiError{fasthttp.StatusNotFound, codeKeyNotFound, "API key not found"}
	errMethodNotAllowed = &apiError{fasthttp.StatusMethodNotAllowed, codeMethodNotAllowed, "method not allowed"}
	errCSRFOrigin       = &apiError{fasthttp.StatusForbidden, codeCSRF, "cross-site request refused: Origin or Referer names another host"}
	errCSRFForm         = &apiError{fasthttp.StatusForbidden, codeCSRF, "form content type refused with a session cookie: send Content-Type: application/json"}
	errTooLarge         = &apiError{fasthttp.StatusRequestEntityTooLarge, codeTooLarge, "request body too large"}
	errBodyRead         = &apiError{fasthttp.StatusBadRequest, codeBadRequest, "request body could not be read"}
	errInvalidPath      = &apiError{fasthttp.StatusBadRequest, codeInvalidPath, "proxy path must be /api/proxy/{service}/v1/{path}"}
	errUnknownService   = &apiError{fasthttp.StatusNotFound, codeUnknownService, "unknown service"}

	errTokenInvalid      = &apiError{fasthttp.StatusUnauthorized, codeInvalidToken, "access token is invalid or revoked"}
	errKeyNotToken       = &apiError{fasthttp.StatusUnauthorized, codeInvalidToken, "API keys (svc_live_…) are not accepted on the management API: send an access token (svc_pat_…)"}
	errTokenNotFound     = &apiError{fasthttp.StatusNotFound, codeTokenNotFound, "access token not found"}
	errNoControl         = &apiError{fasthttp.StatusServiceUnavailable, codeUnavailable, "access tokens and API-managed services are not available on this server"}
	errServiceReadOnly   = &apiError{fasthttp.StatusConflict, codeServiceReadOnly, "this service comes from the config file: change it there (it is read-only through the API)"}
	errServiceNotAllowed = &apiError{fasthttp.StatusForbidden, codeServiceNotAllowed, "this API key is not allowed to use this service"}
	errServiceDisabled   = &apiError{fasthttp.StatusServiceUnavailable, codeServiceDisabled, "this service is disabled"}
)

// invalidJSON reports a body that is not one well-formed JSON object.
func invalidJSON(detail string) error {
	return &apiError{fasthttp.StatusBadRequest, codeInvalidJSON, "malformed JSON body: " + detail}
}

// invalidField reports a body or query field that fails validation; the
// message always starts with the field's name.
func invalidField(field, format string, args ...any) error {
	return &apiError{fasthttp.StatusBadRequest, codeValidation, field + " " + fmt.Sprintf(format, args...)}
}

// rateLimitedError carries the decision of a refused request to the 429 body.
type rateLimitedError struct{ d ratelimit.Decision }

func (e *rateLimitedError) Error() string { return keys.ErrRateLimited.Error() }
func (e *rateLimitedError) Unwrap() error { return keys.ErrRateLimited }

// upstreamError is a failed exchange with a proxied service.
type upstreamError struct {
	up  *upstream
	err error
}

func (e *upstreamError) Error() string { return "upstream " + e.up.name + ": " + e.err.Error() }
func (e *upstreamError) Unwrap() error { return e.err }

// timeout reports whether the upstream failure is a timeout (504) rather
// than a refused or broken connection (502).
func (e *upstreamError) timeout() bool {
	var te interface{ Timeout() bool }
	switch {
	case errors.Is(e.err, fasthttp.ErrTimeout), errors.Is(e.err, fasthttp.ErrDialTimeout),
		errors.Is(e.err, fasthttp.ErrNoFreeConns), errors.Is(e.err, relay.ErrNoFreeConns),
		errors.Is(e.err, context.DeadlineExceeded):
		return true
	case errors.As(e.err, &te):
		return te.Timeout()
	}
	return false
}

// sentinel maps one error of the actors package to a status and a code.
type sentinel struct {
	err    error
	status int
	code   string
	msg    string
}

var sentinels = []sentinel{
	{keys.ErrKeyMissing, fasthttp.StatusUnauthorized, codeMissingKey, "API key required in X-API-Key or Authorization: Bearer"},
	{keys.ErrKeyInvalid, fasthttp.StatusUnauthorized, codeInvalidKey, "API key is invalid"},
	{keys.ErrKeyExpired, fasthttp.StatusUnauthorized, codeKeyExpired, "API key has expired"},
	{keys.ErrKeyRevoked, fasthttp.StatusUnauthorized, codeKeyRevoked, "API key has been revoked"},
	{keys.ErrKeyNotFound, fasthttp.StatusNotFound, codeKeyNotFound, "API key not found"},
	{keys.ErrKeyInactive, fasthttp.StatusBadRequest, codeKeyInactive, "API key is inactive"},
	{keys.ErrLicenseRequired, fasthttp.StatusForbidden, codeLicenseRequired, "an active license is required"},
	{keys.ErrKeyLimit, fasthttp.StatusForbidden, codeKeyLimit, "your plan's key limit is reached: delete a key first"},
	{accounts.ErrUserNotFound, fasthttp.StatusNotFound, codeNotFound, "user not found"},
	{accounts.ErrEmailTaken, fasthttp.StatusConflict, codeEmailTaken, "email already registered"},
	{accounts.ErrBadCredentials, fasthttp.StatusUnauthorized, codeInvalidCreds, "invalid email or password"},
	{accounts.ErrLoginThrottled, fasthttp.StatusTooManyRequests, codeRateLimited, "too many failed logins: retry later"},
	{accounts.ErrBusy, fasthttp.StatusServiceUnavailable, codeUnavailable, "service busy: retry in a second"},
	{accounts.ErrSessionInvalid, fasthttp.StatusUnauthorized, codeUnauthorized, "session expired or invalid"},
	{actors.ErrUnavailable, fasthttp.StatusServiceUnavailable, codeUnavailable, "service temporarily unavailable"},
	{control.ErrTokenInvalid, fasthttp.StatusUnauthorized, codeInvalidToken, "access token is invalid or revoked"},
	{control.ErrTokenExpired, fasthttp.StatusUnauthorized, codeTokenExpired, "access token has expired"},
	{control.ErrTokenThrottled, fasthttp.StatusTooManyRequests, codeRateLimited, "too many invalid access tokens: retry later"},
	{control.ErrTokenNotFound, fasthttp.StatusNotFound, codeTokenNotFound, "access token not found"},
	{control.ErrServiceNotFound, fasthttp.StatusNotFound, codeServiceNotFound, "service not found"},
	{control.ErrServiceExists, fasthttp.StatusConflict, codeServiceExists, "a service with this name exists"},
	{context.DeadlineExceeded, fasthttp.StatusServiceUnavailable, codeUnavailable, "service temporarily unavailable"},
	{context.Canceled, fasthttp.StatusServiceUnavailable, codeUnavailable, "service temporarily unavailable"},
	{fasthttp.ErrBodyTooLarge, fasthttp.StatusRequestEntityTooLarge, codeTooLarge, "request body too large"},
	// The listener's own failures (listener.ServerError, a panic already logged).
	{listener.ErrTooLarge, fasthttp.StatusRequestEntityTooLarge, codeTooLarge, "request body too large"},
	{listener.ErrRequestTimeout, fasthttp.StatusRequestTimeout, codeRequestTimeout, "request not received in time"},
	{listener.ErrMalformed, fasthttp.StatusBadRequest, codeBadRequest, "malformed HTTP request"},
	{listener.ErrPanic, fasthttp.StatusInternalServerError, codeInternal, "internal error"},
}

// classify returns the status, code and client-safe message of err. The
// last result reports an unexpected error, which the caller logs.
func classify(err error) (status int, code, msg string, unexpected bool) {
	var ae *apiError
	if errors.As(err, &ae) {
		return ae.status, ae.code, ae.msg, false
	}
	var ue *upstreamError
	if errors.As(err, &ue) {
		if ue.timeout() {
			return fasthttp.StatusGatewayTimeout, codeUpstreamTimeout, "upstream " + ue.up.name + " did not answer in time", false
		}
		return fasthttp.StatusBadGateway, codeUpstreamDown, "upstream " + ue.up.name + " is unavailable", false
	}
	if errors.Is(err, keys.ErrRateLimited) {
		return fasthttp.StatusTooManyRequests, codeRateLimited, "rate limit exceeded", false
	}
	if errors.Is(err, actors.ErrInvalidArgument) {
		return fasthttp.StatusBadRequest, codeValidation, readable(err), false
	}
	for _, s := range sentinels {
		if errors.Is(err, s.err) {
			return s.status, s.code, s.msg, false
		}
	}
	return fasthttp.StatusInternalServerError, codeInternal, "internal error", true
}

// readable strips the "actors: " noise from a validation error, leaving the
// part that names the field: "name must be 1-100 characters".
func readable(err error) string {
	msg := strings.ReplaceAll(err.Error(), ": "+actors.ErrInvalidArgument.Error(), "")
	msg = strings.ReplaceAll(msg, actors.ErrInvalidArgument.Error()+": ", "")
	msg = strings.ReplaceAll(msg, "actors: ", "")
	if msg == "" || msg == actors.ErrInvalidArgument.Error() {
		return "invalid argument"
	}
	return msg
}

// writeError writes the response for err: {error, message}, or the 429
// body {error, retryAfter} with Retry-After for a refused request.
func (s *Server) writeError(rc *fasthttp.RequestCtx, err error) {
	status, code, msg, unexpected := classify(err)
	if unexpected {
		s.lg.Error("request failed", "method", string(rc.Method()), "path", string(rc.Path()), "err", listener.Redact(err.Error())) // an error may quote a key
	}
	var ue *upstreamError
	if errors.As(err, &ue) && ue.up.warnDue(time.Now()) {
		s.lg.Warn("upstream failed", "service", ue.up.name, "status", status, "err", ue.err)
	}
	rc.Response.ResetBody()
	if status == fasthttp.StatusTooManyRequests {
		retry := int64(1)
		var rl *rateLimitedError
		var te *accounts.ThrottledError
		var ce *control.ThrottledError
		switch {
		case errors.As(err, &ce):
			retry = max(int64(math.Ceil(ce.RetryAfter.Seconds())), 1)
		case errors.As(err, &rl) && rl.d.RetryAfter > 0:
			retry = rl.d.RetryAfter
		case errors.As(err, &te):
			retry = max(int64(math.Ceil(te.RetryAfter.Seconds())), 1)
		}
		rc.Response.Header.Set("Retry-After", strconv.FormatInt(retry, 10))
		writeJSON(rc, status, rateLimitBody{Error: code, RetryAfter: retry})
		return
	}
	if errors.Is(err, accounts.ErrBusy) {
		rc.Response.Header.Set("Retry-After", "1")
	}
	writeJSON(rc, status, errorBody{Error: code, Message: msg})
}

// writeValidateError answers POST /api/keys/validate: key errors are 401
// {valid:false, error}; anything else (503, 500) has the usual shape.
func (s *Server) writeValidateError(rc *fasthttp.RequestCtx, err error) {
	status, code, _, _ := classify(err)
	if status != fasthttp.StatusUnauthorized {
		s.writeError(rc, err)
		return
	}
	writeJSON(rc, status, validateBody{Valid: false, Error: code})
}

// serverError is the listener's ErrorHandler: requests fasthttp could
// not read (too large, malformed, nothing before the read timeout: 408,
// as fasthttp's own default answers) and handlers that panicked.
func (s *Server) serverError(rc *fasthttp.RequestCtx, err error) {
	s.writeError(rc, listener.ServerError(err))
}

type errorBody struct {
	Error   string `json:"error"`
	Message string `json:"message"`
}

type rateLimitBody struct {
	Error      string `json:"error"`
	RetryAfter int64  `json:"retryAfter"`
}
