package httpapi

import (
	"errors"
	"io"

	"github.com/valyala/fasthttp"
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

// bufferBody reads a streamed request body whole. A body longer than
// limit is refused unread (413) and its connection closed after the
// answer; a body that breaks off is errBodyRead.
func bufferBody(rc *fasthttp.RequestCtx, limit int) error {
	if !rc.Request.IsBodyStream() {
		return nil
	}
	cl := rc.Request.Header.ContentLength()
	switch {
	case cl == 0:
		return nil
	case cl > limit:
		rc.SetConnectionClose()
		return errTooLarge
	}
	w := limitedBuffer{left: limit}
	if err := rc.Request.BodyWriteTo(&w); err != nil {
		rc.SetConnectionClose()
		if errors.Is(err, errBodyLimit) {
			return errTooLarge
		}
		return errBodyRead
	}
	rc.Request.SetBodyRaw(w.b)
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

// limitedBuffer collects at most left bytes; beyond, Write fails with
// errBodyLimit.
type limitedBuffer struct {
	b    []byte
	left int
}

func (w *limitedBuffer) Write(p []byte) (int, error) {
	if len(p) > w.left {
		return 0, errBodyLimit
	}
	w.left -= len(p)
	w.b = append(w.b, p...)
	return len(p), nil
}
