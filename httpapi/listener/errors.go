package listener

import (
	"errors"
	"net"

	"github.com/valyala/fasthttp"
)

// Failures the listener reports to Options.ErrorHandler. Each listener
// maps them to its own error body.
var (
	// ErrPanic: a handler panicked; the panic is logged already.
	ErrPanic = errors.New("listener: handler panicked")
	// ErrTooLarge: the body is over the size limit.
	ErrTooLarge = errors.New("listener: request body too large")
	// ErrRequestTimeout: nothing arrived before the read timeout (an idle
	// keep-alive connection, usually).
	ErrRequestTimeout = errors.New("listener: request not received in time")
	// ErrMalformed: fasthttp could not parse the request.
	ErrMalformed = errors.New("listener: malformed HTTP request")
)

// ServerError classifies an error fasthttp reports for a request it could
// not read as ErrTooLarge, ErrRequestTimeout or ErrMalformed. The
// listener's own errors pass unchanged.
func ServerError(err error) error {
	var ne net.Error
	switch {
	case errors.Is(err, ErrPanic), errors.Is(err, ErrTooLarge), errors.Is(err, ErrRequestTimeout), errors.Is(err, ErrMalformed):
		return err
	case errors.Is(err, fasthttp.ErrBodyTooLarge):
		return ErrTooLarge
	case errors.As(err, &ne) && ne.Timeout():
		return ErrRequestTimeout
	}
	return ErrMalformed
}
