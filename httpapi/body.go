package httpapi

import (
	"errors"
	"io"

	"github.com/valyala/fasthttp"

	"gatehouse/httpapi/listener"
)

// The API server reads request bodies as streams (fasthttp's
// StreamRequestBody), so that the proxy can pass large uploads on as they
// arrive. fasthttp then holds at most a few KiB of a body before the
// handler runs, and it does not skip what a handler leaves unread: the
// next request on the connection would be read from the middle of this
// one's body. Hence two rules, enforced by the route wrappers:
//
//   - wrap (every route but the hot ones) reads the body whole, up to
//     MaxBodyBytes, before the handler runs (bufferBody), so handlers see
//     an ordinary body;
//   - wrapHot routes (the proxy, validate) own the body: they read it to
//     its end, or call settleUnreadBody.

// bufferBody reads a streamed request body whole (listener.BufferBody):
// a body longer than limit is refused unread (413) and its connection
// closed after the answer; a body that breaks off is errBodyRead.
func bufferBody(rc *fasthttp.RequestCtx, limit int) error {
	switch err := listener.BufferBody(rc, limit); {
	case errors.Is(err, listener.ErrTooLarge):
		return errTooLarge
	case err != nil:
		return errBodyRead
	}
	return nil
}

// settleUnreadBody makes sure that a request body the handler did not read
// cannot be taken for the next request: a short one (at most
// bufferBodyMax) is read and dropped, a longer or chunked one closes the
// connection after the answer.
func settleUnreadBody(rc *fasthttp.RequestCtx) {
	if !rc.Request.IsBodyStream() {
		return
	}
	cl := rc.Request.Header.ContentLength()
	if cl == 0 || cl > 0 && cl <= bufferBodyMax && rc.Request.BodyWriteTo(io.Discard) == nil {
		return
	}
	rc.SetConnectionClose()
}
