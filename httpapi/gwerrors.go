package httpapi

import (
	"context"
	"errors"
	"strings"

	"github.com/valyala/fasthttp"

	"gatehouse/actors"
	"gatehouse/actors/gateway"
)

// This file is the only place where gateway errors become HTTP statuses,
// error codes and envelopes (see doc.go, "Agent gateway").

// Gateway error codes (the seed's list).
const (
	gwUnauthorized  = "UNAUTHORIZED"
	gwInvalid       = "INVALID_REQUEST"
	gwNotFound      = "NOT_FOUND"
	gwExists        = "ALREADY_EXISTS"
	gwPrecondition  = "FAILED_PRECONDITION"
	gwExhausted     = "RESOURCE_EXHAUSTED"
	gwUnavailable   = "UNAVAILABLE"
	gwAgentTimeout  = "AGENT_TIMEOUT"
	gwInternal      = "INTERNAL"
	rateRetryMs     = 60_000
	unavailRetryMs  = 1_000
	rateRetryHeader = "60"
)

// gwError is a classified gateway error: status, code and a catalogue
// message with its arguments.
type gwError struct {
	status int
	code   string
	msg    msgID
	args   []any
}

func (e *gwError) Error() string { return e.code + ": " + e.msg.text(langEN, e.args...) }

func gwErr(status int, code string, msg msgID, args ...any) *gwError {
	return &gwError{status: status, code: code, msg: msg, args: args}
}

// Errors raised by the gateway's HTTP layer.
var (
	errGWTokenMissing    = gwErr(fasthttp.StatusUnauthorized, gwUnauthorized, msgTokenMissing)
	errGWTokenInvalid    = gwErr(fasthttp.StatusUnauthorized, gwUnauthorized, msgTokenInvalid)
	errGWUserRequired    = gwErr(fasthttp.StatusBadRequest, gwInvalid, msgUserRequired)
	errGWRateLimited     = gwErr(fasthttp.StatusTooManyRequests, gwExhausted, msgRateLimited)
	errGWRouteNotFound   = gwErr(fasthttp.StatusNotFound, gwNotFound, msgRouteNotFound)
	errGWMethod          = gwErr(fasthttp.StatusMethodNotAllowed, gwInvalid, msgMethodNotAllowed)
	errGWTooLarge        = gwErr(fasthttp.StatusRequestEntityTooLarge, gwInvalid, msgTooLarge)
	errGWAgentDisabled   = gwErr(fasthttp.StatusPreconditionFailed, gwPrecondition, msgAgentDisabled)
	errGWProvDisabled    = gwErr(fasthttp.StatusPreconditionFailed, gwPrecondition, msgProviderDisabled)
	errGWOwnerOnly       = gwErr(fasthttp.StatusForbidden, gwUnauthorized, msgOwnerOnly)
	errGWInternal        = gwErr(fasthttp.StatusInternalServerError, gwInternal, msgInternal)
	errGWAgentNotFound   = gwErr(fasthttp.StatusNotFound, gwNotFound, msgAgentNotFound)
	errGWProvNotFound    = gwErr(fasthttp.StatusNotFound, gwNotFound, msgProviderNotFound)
	errGWKeyNotFound     = gwErr(fasthttp.StatusNotFound, gwNotFound, msgKeyNotFound)
	errGWAgentExists     = gwErr(fasthttp.StatusConflict, gwExists, msgAgentExists)
	errGWProviderExists  = gwErr(fasthttp.StatusConflict, gwExists, msgProviderExists)
	errGWUnavailableBase = gwErr(fasthttp.StatusServiceUnavailable, gwUnavailable, msgUnavailable)
)

func errGWScope(s gateway.Scope) error {
	return gwErr(fasthttp.StatusForbidden, gwUnauthorized, msgScopeDenied, string(s))
}

func errGWInvalid(detail string) error {
	return gwErr(fasthttp.StatusBadRequest, gwInvalid, msgInvalid, detail)
}

func errGWBadHeader(name string) error {
	return gwErr(fasthttp.StatusBadRequest, gwInvalid, msgBadHeader, name)
}

func errGWJSON(detail string) error {
	return gwErr(fasthttp.StatusBadRequest, gwInvalid, msgInvalidJSON, detail)
}

// agentTimeoutError is a run that passed its agent's time limit.
type agentTimeoutError struct{ seconds int }

func (e *agentTimeoutError) Error() string { return "agent timed out" }

// providerError is a failed call to an agent's provider.
type providerError struct{ detail string }

func (e *providerError) Error() string { return "provider: " + e.detail }

// resource turns the gateway's generic not-found and exists errors into the
// resource's own message; other errors pass unchanged.
func resource(err error, notFound, exists *gwError) error {
	switch {
	case notFound != nil && errors.Is(err, gateway.ErrNotFound):
		return notFound
	case exists != nil && errors.Is(err, gateway.ErrExists):
		return exists
	}
	return err
}

// gwClassify maps err to a *gwError; unexpected reports an error to log.
func gwClassify(err error) (e *gwError, unexpected bool) {
	var ge *gwError
	var te *agentTimeoutError
	var pe *providerError
	switch {
	case errors.As(err, &ge):
		return ge, false
	case errors.As(err, &te):
		return gwErr(fasthttp.StatusGatewayTimeout, gwAgentTimeout, msgAgentTimeout, te.seconds), false
	case errors.As(err, &pe):
		return gwErr(fasthttp.StatusServiceUnavailable, gwUnavailable, msgProviderFailed, pe.detail), false
	case errors.Is(err, gateway.ErrKeyMissing):
		return errGWTokenMissing, false
	case errors.Is(err, gateway.ErrKeyInvalid):
		return errGWTokenInvalid, false
	case errors.Is(err, gateway.ErrForbidden):
		return errGWOwnerOnly, false
	case errors.Is(err, gateway.ErrNotFound):
		return gwErr(fasthttp.StatusNotFound, gwNotFound, msgNotFound), false
	case errors.Is(err, gateway.ErrExists):
		return gwErr(fasthttp.StatusConflict, gwExists, msgExists, gwReadable(err)), false
	case errors.Is(err, gateway.ErrInUse):
		return gwErr(fasthttp.StatusPreconditionFailed, gwPrecondition, msgInUse, gwReadable(err)), false
	case errors.Is(err, gateway.ErrInvalid):
		return gwErr(fasthttp.StatusBadRequest, gwInvalid, msgInvalid, gwReadable(err)), false
	case errors.Is(err, fasthttp.ErrBodyTooLarge):
		return errGWTooLarge, false
	case errors.Is(err, actors.ErrUnavailable), errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return errGWUnavailableBase, false
	}
	return errGWInternal, true
}

// gwReadable strips the package prefixes, leaving the part naming the field.
func gwReadable(err error) string {
	msg := err.Error()
	for _, s := range []error{gateway.ErrInvalid, gateway.ErrInUse, gateway.ErrExists} {
		msg = strings.ReplaceAll(msg, ": "+s.Error(), "")
	}
	return strings.TrimPrefix(msg, "gateway: ")
}

// errorType is the OpenAI-style error type, so OpenAI clients read it.
func errorType(e *gwError) string {
	switch e.code {
	case gwUnauthorized:
		if e.status == fasthttp.StatusForbidden {
			return "permission_error"
		}
		return "authentication_error"
	case gwInvalid, gwPrecondition:
		return "invalid_request_error"
	case gwNotFound:
		return "not_found_error"
	case gwExists:
		return "conflict_error"
	case gwExhausted:
		return "rate_limit_error"
	case gwAgentTimeout:
		return "timeout_error"
	}
	return "server_error"
}

// retryOf reports whether a client may retry e, and after how long.
func retryOf(e *gwError) (bool, int64) {
	switch e.code {
	case gwExhausted:
		return true, rateRetryMs
	case gwUnavailable:
		return true, unavailRetryMs
	case gwAgentTimeout:
		return true, 0
	}
	return false, 0
}

// gwErrorBody is the one error envelope of the gateway.
type gwErrorBody struct {
	Error gwErrorDetail `json:"error"`
}

type gwErrorDetail struct {
	Code         string `json:"code"`
	Message      string `json:"message"`
	Type         string `json:"type"`
	Retryable    bool   `json:"retryable"`
	RetryAfterMs int64  `json:"retryAfterMs"`
}

// envelope renders err in lang; unexpected as gwClassify.
func envelope(err error, lang int) (*gwError, gwErrorBody, bool) {
	e, unexpected := gwClassify(err)
	retry, after := retryOf(e)
	return e, gwErrorBody{Error: gwErrorDetail{
		Code: e.code, Message: e.msg.text(lang, e.args...), Type: errorType(e), Retryable: retry, RetryAfterMs: after,
	}}, unexpected
}
