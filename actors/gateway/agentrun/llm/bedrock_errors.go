package llm

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"syscall"

	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// bedrockError turns an SDK call's error into the contract's: ctx's
// error once ctx is done, our own *Error (a body past its bound) as is,
// an *Error with the status, the AWS error type (x-amzn-ErrorType, the
// typed exception's code) and message for an error answer, Malformed for
// an answer the SDK could not read, Unreachable for no answer.
func bedrockError(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	var own *Error
	if errors.As(err, &own) {
		return own
	}
	var re *smithyhttp.ResponseError
	if errors.As(err, &re) && re.Response != nil && re.Response.Response != nil && re.Response.StatusCode != 0 && re.Response.StatusCode/100 != 2 {
		e := &Error{Kind: KindStatus, Status: re.HTTPStatusCode(), RetryAfter: RetryAfter(re.Response.Header, nil)}
		var api smithy.APIError
		if errors.As(err, &api) {
			if c := api.ErrorCode(); c != "UnknownError" {
				e.Type = c
			}
			if m := api.ErrorMessage(); m != "UnknownError" {
				e.Message = Clip(m)
			}
		}
		if e.Message == "" {
			e.Message = http.StatusText(e.Status)
		}
		if e.Message == "" {
			e.Message = "error"
		}
		return e
	}
	var de *smithy.DeserializationError
	if errors.As(err, &de) {
		return Malformed("bedrock: unreadable answer")
	}
	var ip *smithy.InvalidParamsError
	if errors.As(err, &ip) { // refused by the SDK before sending
		return fmt.Errorf("bedrock: invalid request: %w", err)
	}
	return Unreachable(ctx, err)
}

// bedrockStreamError is bedrockError for an error met while reading a
// ConverseStream: an exception frame (throttlingException,
// modelStreamErrorException, …) is a StreamError; a broken connection is
// Unreachable; anything else (a bad CRC, a frame that is not an event,
// unreadable JSON) is Malformed.
func bedrockStreamError(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	var own *Error
	if errors.As(err, &own) {
		return own
	}
	var api smithy.APIError
	if errors.As(err, &api) {
		return StreamError(api.ErrorCode(), api.ErrorMessage())
	}
	var ne net.Error
	if errors.As(err, &ne) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, net.ErrClosed) {
		return Unreachable(ctx, err)
	}
	return Malformed("bedrock: unreadable event stream")
}
