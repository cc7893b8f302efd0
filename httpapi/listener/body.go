package listener

import (
	"errors"

	"github.com/valyala/fasthttp"
)

// ErrBodyRead: the request body broke off before its end.
var ErrBodyRead = errors.New("listener: request body could not be read")

// BufferBody reads a streamed request body (Options.StreamRequestBody)
// whole, so that the handler sees an ordinary body. A body longer than
// limit is refused unread (ErrTooLarge, from its Content-Length when it
// has one) and its connection closed after the answer; a body that breaks
// off is ErrBodyRead. A body that is not streamed is left as it is.
func BufferBody(rc *fasthttp.RequestCtx, limit int) error {
	if !rc.Request.IsBodyStream() {
		if len(rc.Request.Body()) > limit {
			return ErrTooLarge
		}
		return nil
	}
	cl := rc.Request.Header.ContentLength()
	switch {
	case cl == 0:
		return nil
	case cl > limit:
		rc.SetConnectionClose()
		return ErrTooLarge
	}
	w := limitedBuffer{left: limit}
	if err := rc.Request.BodyWriteTo(&w); err != nil {
		rc.SetConnectionClose()
		if errors.Is(err, errBufferFull) {
			return ErrTooLarge
		}
		return ErrBodyRead
	}
	rc.Request.SetBodyRaw(w.b)
	return nil
}

var errBufferFull = errors.New("listener: body over the limit")

// limitedBuffer collects at most left bytes; beyond, Write fails.
type limitedBuffer struct {
	b    []byte
	left int
}

func (w *limitedBuffer) Write(p []byte) (int, error) {
	if len(p) > w.left {
		return 0, errBufferFull
	}
	w.left -= len(p)
	w.b = append(w.b, p...)
	return len(p), nil
}
