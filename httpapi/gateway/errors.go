package gateway

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/valyala/fasthttp"

	"gatehouse/actors"
	"gatehouse/actors/gateway"
	"gatehouse/actors/gateway/agentrun"
	"gatehouse/actors/gateway/blob"
	"gatehouse/actors/gateway/webhook"
	"gatehouse/actors/gateway/workspace"
	"gatehouse/httpapi/listener"
)

// This file is the only place where errors become statuses, error codes
// and envelopes: classify maps any error to an *apiError once, and each
// transport has one mapper on top of it: writeError (the HTTP envelope)
// and sseStream.Error (the error of a stream). Unexpected errors are
// logged once, by the mapper that answers them.

// Gateway error codes (the seed's list).
const (
	codeUnauthorized = "UNAUTHORIZED"
	codeInvalid      = "INVALID_REQUEST"
	codeNotFound     = "NOT_FOUND"
	codeExists       = "ALREADY_EXISTS"
	codePrecondition = "FAILED_PRECONDITION"
	codeExhausted    = "RESOURCE_EXHAUSTED"
	codeUnavailable  = "UNAVAILABLE"
	codeAgentTimeout = "AGENT_TIMEOUT"
	codeInternal     = "INTERNAL"
	rateRetryMs      = 60_000
	unavailRetryMs   = 1_000
	rateRetryHeader  = "60"
)

// apiError is a classified gateway error: status, code and a catalogue
// message with its arguments.
type apiError struct {
	status int
	code   string
	msg    msgID
	args   []any
	output string // a failed tool's output (tools.invoke)
	// final: a cap, not a rate (gateway.ErrQuota): retrying does not help,
	// so no Retry-After and retryable false.
	final bool
	// retryAfter, when > 0, is the Retry-After (seconds) of a 503 worth
	// retrying soon (an MCP server starting), or of a 429 whose wait is
	// not the rate limiter's minute (a busy webhook instance).
	retryAfter int
}

func (e *apiError) Error() string { return e.code + ": " + e.msg.text(langEN, e.args...) }

func newError(status int, code string, msg msgID, args ...any) *apiError {
	return &apiError{status: status, code: code, msg: msg, args: args}
}

// Errors raised by the gateway's HTTP layer.
var (
	errTokenMissing   = newError(fasthttp.StatusUnauthorized, codeUnauthorized, msgTokenMissing)
	errTokenInvalid   = newError(fasthttp.StatusUnauthorized, codeUnauthorized, msgTokenInvalid)
	errUserRequired   = newError(fasthttp.StatusBadRequest, codeInvalid, msgUserRequired)
	errRateLimited    = newError(fasthttp.StatusTooManyRequests, codeExhausted, msgRateLimited)
	errRouteNotFound  = newError(fasthttp.StatusNotFound, codeNotFound, msgRouteNotFound)
	errMethod         = newError(fasthttp.StatusMethodNotAllowed, codeInvalid, msgMethodNotAllowed)
	errTooLarge       = newError(fasthttp.StatusRequestEntityTooLarge, codeInvalid, msgTooLarge)
	errAgentDisabled  = newError(fasthttp.StatusPreconditionFailed, codePrecondition, msgAgentDisabled)
	errProvDisabled   = newError(fasthttp.StatusPreconditionFailed, codePrecondition, msgProviderDisabled)
	errOwnerOnly      = newError(fasthttp.StatusForbidden, codeUnauthorized, msgOwnerOnly)
	errWebhookAuth    = newError(fasthttp.StatusUnauthorized, codeUnauthorized, msgWebhookAuth)
	errUserBinding    = newError(fasthttp.StatusForbidden, codeUnauthorized, msgUserBinding)
	errTooManyConns   = newError(fasthttp.StatusTooManyRequests, codeExhausted, msgTooManyConns)
	errUserFileOnly   = newError(fasthttp.StatusForbidden, codeUnauthorized, msgUserFileOnly)
	errAborted        = newError(fasthttp.StatusConflict, codePrecondition, msgAborted)
	errInternal       = newError(fasthttp.StatusInternalServerError, codeInternal, msgInternal)
	errAgentNotFound  = newError(fasthttp.StatusNotFound, codeNotFound, msgAgentNotFound)
	errProvNotFound   = newError(fasthttp.StatusNotFound, codeNotFound, msgProviderNotFound)
	errKeyNotFound    = newError(fasthttp.StatusNotFound, codeNotFound, msgKeyNotFound)
	errAgentExists    = newError(fasthttp.StatusConflict, codeExists, msgAgentExists)
	errProviderExists = newError(fasthttp.StatusConflict, codeExists, msgProviderExists)
	errUnavailable    = newError(fasthttp.StatusServiceUnavailable, codeUnavailable, msgUnavailable)
	errNotFound       = newError(fasthttp.StatusNotFound, codeNotFound, msgNotFound) // any resource: gateway.ErrNotFound
	errNoSuchMethod   = newError(fasthttp.StatusNotFound, codeNotFound, msgNoSuchMethod)
)

// webhookBusyRetry is the Retry-After of an async webhook message refused
// because its instance has gateway.webhook_max_in_flight messages in
// flight, in seconds.
const webhookBusyRetry = 5

// mcpStartingRetry is the Retry-After of errMCPStarting, in seconds.
const mcpStartingRetry = 2

// errMCPStarting: the named MCP servers are still connecting (a first
// start may download them): 503, retryable, with Retry-After.
func errMCPStarting(names string) error {
	e := newError(fasthttp.StatusServiceUnavailable, codeUnavailable, msgMCPStarting, names)
	e.retryAfter = mcpStartingRetry
	return e
}

func errScope(s gateway.Scope) error {
	return newError(fasthttp.StatusForbidden, codeUnauthorized, msgScopeDenied, string(s))
}

func errInvalid(detail string) error {
	return newError(fasthttp.StatusBadRequest, codeInvalid, msgInvalid, detail)
}

func errBadHeader(name string) error {
	return newError(fasthttp.StatusBadRequest, codeInvalid, msgBadHeader, name)
}

func errJSON(detail string) error {
	return newError(fasthttp.StatusBadRequest, codeInvalid, msgInvalidJSON, detail)
}

// resource turns the gateway's generic not-found and exists errors into the
// resource's own message; other errors pass unchanged.
func resource(err error, notFound, exists *apiError) error {
	switch {
	case notFound != nil && errors.Is(err, gateway.ErrNotFound):
		return notFound
	case exists != nil && errors.Is(err, gateway.ErrExists):
		return exists
	}
	return err
}

// classify maps err to a *apiError; unexpected reports an error to log.
func classify(err error) (e *apiError, unexpected bool) {
	var ge *apiError
	var te *agentrun.TimeoutError
	var pe *agentrun.ProviderError
	var be *agentrun.BudgetError
	switch {
	case errors.As(err, &ge):
		return ge, false
	case errors.As(err, &te):
		return newError(fasthttp.StatusGatewayTimeout, codeAgentTimeout, msgAgentTimeout, te.Seconds), false
	case errors.As(err, &pe):
		// 502: the provider failed or answered badly (after the runtime's
		// retries and fallbacks); 503 with Retry-After when every
		// provider of the agent was cooling down and none was called.
		if pe.RetryAfter > 0 {
			e := newError(fasthttp.StatusServiceUnavailable, codeUnavailable, msgProviderFailed, pe.Detail)
			e.retryAfter = int(min(max(pe.RetryAfter.Round(time.Second)/time.Second, 1), 3600))
			return e, false
		}
		return newError(fasthttp.StatusBadGateway, codeUnavailable, msgProviderFailed, pe.Detail), false
	case errors.As(err, &be): // a cap until the budget resets: not retryable, Retry-After at the reset
		e := newError(fasthttp.StatusTooManyRequests, codeExhausted, msgQuota, be.Error())
		e.final, e.retryAfter = true, int(min((be.RetryAfter+time.Second-1)/time.Second, 31*24*3600))
		return e, false
	case errors.Is(err, agentrun.ErrAgentNotFound):
		return errAgentNotFound, false
	case errors.Is(err, agentrun.ErrAgentDisabled):
		return errAgentDisabled, false
	case errors.Is(err, agentrun.ErrProviderDisabled):
		return errProvDisabled, false
	case errors.Is(err, gateway.ErrKeyMissing):
		return errTokenMissing, false
	case errors.Is(err, gateway.ErrKeyInvalid):
		return errTokenInvalid, false
	case errors.Is(err, gateway.ErrForbidden):
		return errOwnerOnly, false
	case errors.Is(err, webhook.ErrUnauthorized):
		return errWebhookAuth, false
	case errors.Is(err, webhook.ErrBusy):
		e := newError(fasthttp.StatusTooManyRequests, codeExhausted, msgWebhookBusy)
		e.retryAfter = webhookBusyRetry
		return e, false
	case errors.Is(err, workspace.ErrBadPath):
		return errBadFilePath, false
	case errors.Is(err, workspace.ErrAgentNotFound):
		return errAgentNotFound, false
	case errors.Is(err, gateway.ErrNotFound):
		return errNotFound, false
	case errors.Is(err, gateway.ErrExists):
		return newError(fasthttp.StatusConflict, codeExists, msgExists, readable(err)), false
	case errors.Is(err, gateway.ErrDisabled):
		return newError(fasthttp.StatusPreconditionFailed, codePrecondition, msgInUse, readable(err)), false
	case errors.Is(err, agentrun.ErrToolLimit):
		return newError(fasthttp.StatusUnprocessableEntity, codePrecondition, msgInUse, err.Error()), false
	case errors.Is(err, gateway.ErrInUse):
		return newError(fasthttp.StatusPreconditionFailed, codePrecondition, msgInUse, readable(err)), false
	case errors.Is(err, gateway.ErrInvalid):
		return newError(fasthttp.StatusBadRequest, codeInvalid, msgInvalid, readable(err)), false
	case errors.Is(err, gateway.ErrQuota):
		e := newError(fasthttp.StatusTooManyRequests, codeExhausted, msgQuota, readable(err))
		e.final = true
		return e, false
	case errors.Is(err, listener.ErrTooLarge), errors.Is(err, fasthttp.ErrBodyTooLarge), errors.Is(err, gateway.ErrTooLarge):
		return errTooLarge, false
	case errors.Is(err, blob.ErrUnavailable): // cluster mode: no second copy of an upload, or no node sent a missing blob
		return newError(fasthttp.StatusServiceUnavailable, codeUnavailable, msgBlobUnavailable), false
	case errors.Is(err, actors.ErrUnavailable), errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return errUnavailable, false
	}
	return errInternal, true
}

// readable strips the package prefixes, leaving the part naming the field.
func readable(err error) string {
	msg := err.Error()
	for _, s := range []error{gateway.ErrInvalid, gateway.ErrInUse, gateway.ErrExists, gateway.ErrDisabled, gateway.ErrQuota} {
		msg = strings.ReplaceAll(msg, ": "+s.Error(), "")
	}
	return strings.TrimPrefix(msg, "gateway: ")
}

// errorType is the OpenAI-style error type, so OpenAI clients read it.
func errorType(e *apiError) string {
	switch e.code {
	case codeUnauthorized:
		if e.status == fasthttp.StatusForbidden {
			return "permission_error"
		}
		return "authentication_error"
	case codeInvalid, codePrecondition:
		return "invalid_request_error"
	case codeNotFound:
		return "not_found_error"
	case codeExists:
		return "conflict_error"
	case codeExhausted:
		return "rate_limit_error"
	case codeAgentTimeout:
		return "timeout_error"
	}
	return "server_error"
}

// retryOf reports whether a client may retry e, and after how long.
func retryOf(e *apiError) (bool, int64) {
	if e.final {
		return false, 0
	}
	switch e.code {
	case codeExhausted:
		if e.retryAfter > 0 {
			return true, int64(e.retryAfter) * 1000
		}
		return true, rateRetryMs
	case codeUnavailable:
		if e.retryAfter > 0 {
			return true, int64(e.retryAfter) * 1000
		}
		return true, unavailRetryMs
	case codeAgentTimeout:
		return true, 0
	}
	return false, 0
}

// ErrorBody is the one error envelope of the gateway.
type ErrorBody struct {
	Error ErrorDetail `json:"error"`
}

// ErrorDetail is an error as clients see it: the seed's code, a message
// in the client's language, OpenAI's error type, and whether and when to
// retry. Streams carry it too (Stream.Error).
type ErrorDetail struct {
	Code         string `json:"code"`
	Message      string `json:"message"`
	Type         string `json:"type"`
	Retryable    bool   `json:"retryable"`
	RetryAfterMs int64  `json:"retryAfterMs"`
	// Output is a failed tool's output (POST /v1/tools/invoke).
	Output string `json:"output,omitempty"`
}

// detail renders e in lang.
func detail(e *apiError, lang int) ErrorDetail {
	retry, after := retryOf(e)
	return ErrorDetail{Code: e.code, Message: e.msg.text(lang, e.args...), Type: errorType(e), Retryable: retry, RetryAfterMs: after, Output: e.output}
}

// mapError classifies err for an answer in lang, logging it once if it is
// unexpected; method and path say where it happened. Every transport's
// mapper goes through it.
func (s *Server) mapError(err error, lang int, method, path string) (*apiError, ErrorDetail) {
	e, unexpected := classify(err)
	if unexpected {
		s.lg.Error("request failed", "method", method, "path", path, "err", err)
	}
	return e, detail(e, lang)
}

// writeError is the HTTP mapper: the envelope for err in lang, with
// Retry-After on a 429.
func (s *Server) writeError(rc *fasthttp.RequestCtx, lang int, err error) {
	e, d := s.mapError(err, lang, string(rc.Method()), string(rc.Path()))
	rc.Response.ResetBody()
	if e.code == codeExhausted && !e.final {
		rc.Response.Header.Set("Retry-After", rateRetryHeader)
	}
	if e.retryAfter > 0 {
		rc.Response.Header.Set("Retry-After", strconv.Itoa(e.retryAfter))
	}
	if listener.WriteJSON(rc, e.status, ErrorBody{Error: d}) != nil { // a plain struct: never
		rc.SetStatusCode(fasthttp.StatusInternalServerError)
	}
}

// listenerError is the listener's ErrorHandler: a request fasthttp could
// not read, or a handler that panicked (logged already).
func (s *Server) listenerError(rc *fasthttp.RequestCtx, err error) {
	switch err = listener.ServerError(err); {
	case errors.Is(err, listener.ErrPanic):
		err = errInternal
	case errors.Is(err, listener.ErrTooLarge):
		err = errTooLarge
	default: // malformed, or nothing before the read timeout
		err = errInvalid("malformed HTTP request")
	}
	s.writeError(rc, langOf(rc), err)
}
