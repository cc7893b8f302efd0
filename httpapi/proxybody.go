package httpapi

import (
	"errors"
	"io"
	"sync"

	"github.com/valyala/fasthttp"

	"gatehouse/httpapi/listener"
	"gatehouse/httpapi/relay"
)

// bufferBodyMax is the largest body of known length that the proxy reads
// whole instead of streaming, in either direction: one copy, and the
// Content-Length goes along. Anything longer, or of unknown length
// (chunked, or ended by the upstream closing), is streamed.
const bufferBodyMax = 64 << 10

// requestBody streams the client's request body to the upstream. It
// counts what it passes against MaxProxyBodyBytes (a chunked body has no
// length to check up front) and records whether the body was read to its
// end, and why not if reading it failed: the exchange then failed
// because of the client, not the upstream. It is pooled.
type requestBody struct {
	r    io.Reader // the client's body stream, owned by fasthttp
	left int       // bytes still allowed
	eof  bool
	// failed is the client's fault that ended the stream, as writeError
	// answers it: errTooLarge, errBodyRead (malformed chunked framing, a
	// client gone mid-body) or listener.ErrRequestTimeout.
	failed error
}

var requestBodyPool = sync.Pool{New: func() any { return new(requestBody) }}

// errBodyLimit ends a streamed request body that outgrew MaxProxyBodyBytes.
var errBodyLimit = errors.New("httpapi: request body over the proxy limit")

// Read passes the client's body on. It is deliberately not an io.Closer:
// the stream belongs to the server's RequestCtx, not to the upstream
// request that reads it.
func (b *requestBody) Read(p []byte) (int, error) {
	if b.eof {
		return 0, io.EOF
	}
	n, err := b.r.Read(p)
	b.left -= n
	if b.left < 0 {
		b.failed = errTooLarge
		return 0, errBodyLimit
	}
	switch {
	case err == nil:
	case errors.Is(err, io.EOF):
		b.eof = true
	default:
		b.failed = clientBodyError(err)
	}
	return n, err
}

// clientBodyError is the answer to a client whose body could not be read:
// 408 if it stopped sending until the read deadline, else 400.
func clientBodyError(err error) error {
	var te interface{ Timeout() bool }
	if errors.As(err, &te) && te.Timeout() {
		return listener.ErrRequestTimeout
	}
	return errBodyRead
}

// release returns b to its pool and reports whether the client's body was
// left unread and, if the client is to blame for a failed exchange, the
// error to answer (see requestBody.failed). A nil b (a buffered body) was
// read whole.
func (b *requestBody) release() (unread bool, failed error) {
	if b == nil {
		return false, nil
	}
	unread, failed = !b.eof, b.failed
	*b = requestBody{}
	requestBodyPool.Put(b)
	return unread, failed
}

// exchange is one proxied request's upstream side: the request head,
// a small request body read whole, the relay's request and answer. It
// is pooled; a streamed answer holds it until the server has written it.
type exchange struct {
	head []byte
	body []byte
	req  relay.Request
	resp relay.Response
}

var exchangePool = sync.Pool{New: func() any { return &exchange{head: make([]byte, 0, 1024)} }}

// release ends the upstream exchange (see relay.Response.Release) and
// returns ex to its pool.
func (ex *exchange) release() {
	ex.resp.Release()
	ex.req = relay.Request{}
	if cap(ex.body) > bufferBodyMax {
		ex.body = nil
	}
	ex.body = ex.body[:0]
	exchangePool.Put(ex)
}

// Write appends to the buffered request body.
func (ex *exchange) Write(p []byte) (int, error) {
	ex.body = append(ex.body, p...)
	return len(p), nil
}

// attachBody gives ex's request the client's body: as it is if fasthttp
// holds it whole, copied if its length is known and at most
// bufferBodyMax, else as a stream (chunked upstream if the client's was
// chunked). It returns the stream, or nil if the body was buffered. A
// client whose small body breaks off is answered 400 by the caller
// through errBodyRead.
func attachBody(ex *exchange, rc *fasthttp.RequestCtx, limit int) (*requestBody, error) {
	if !rc.Request.IsBodyStream() {
		ex.req.Body = rc.Request.Body()
		return nil, nil
	}
	cl := rc.Request.Header.ContentLength()
	if cl >= 0 && cl <= bufferBodyMax {
		if cl == 0 {
			return nil, nil
		}
		if err := rc.Request.BodyWriteTo(ex); err != nil {
			return nil, errBodyRead
		}
		ex.req.Body = ex.body
		return nil, nil
	}
	b := requestBodyPool.Get().(*requestBody)
	*b = requestBody{r: rc.RequestBodyStream(), left: limit}
	ex.req.BodyStream = b
	ex.req.BodyLen = int64(max(cl, -1))
	return b, nil
}

// proxyBodyTooLarge reports a body known to be over limit before any of
// it is read: by its Content-Length, or its size if fasthttp holds it.
func proxyBodyTooLarge(rc *fasthttp.RequestCtx, limit int) bool {
	if rc.Request.IsBodyStream() {
		return rc.Request.Header.ContentLength() > limit
	}
	return len(rc.Request.Body()) > limit
}

// copyResponseHeader sets the upstream's status and headers on rc,
// minus its hop-by-hop and framing headers, its cookies and its own
// rate-limit headers (gatehouse sets the five, and a copy of the
// upstream's would travel beside each). The status line is ours: an
// HTTP/1.0 upstream must not make the answer to an HTTP/1.1 client read
// "HTTP/1.0".
func copyResponseHeader(rc *fasthttp.RequestCtx, up *relay.Head) {
	h := &rc.Response.Header
	h.SetStatusCode(up.Status)
	if len(up.Reason) > 0 {
		h.SetStatusMessage(up.Reason)
	}
	// The names are made canonical once, here: fasthttp need not again.
	h.DisableNormalizing()
	defer h.EnableNormalizing()
	var kb [64]byte
	for k, v := range relay.Headers(up.Lines) {
		ck := canonicalKey(kb[:0], k)
		switch string(ck) {
		case "Connection", "Transfer-Encoding", "Content-Length":
			continue // framing is the server's
		case "Set-Cookie":
			// An upstream's cookies would be set on gatehouse's own
			// origin, next to its session cookie: never passed through.
			continue
		}
		if hopByHop(ck) || limitHeader(ck) {
			continue
		}
		h.AddBytesKV(ck, v)
	}
	if up.ContentLength >= 0 && up.BodyLen == 0 {
		h.SetContentLength(int(up.ContentLength)) // a HEAD's, 304's
	}
}

// limitHeader reports whether k (canonical form) is one of the
// rate-limit headers gatehouse sets (setLimitHeaders).
func limitHeader(k []byte) bool {
	switch string(k) {
	case "X-Ratelimit-Limit", "X-Ratelimit-Remaining", "X-Ratelimit-Reset", "Ratelimit", "Ratelimit-Policy":
		return true
	}
	return false
}

// relayBody hands the upstream's body to rc and ex to whoever finishes
// with it. A body of known length up to bufferBodyMax is copied now, so
// its errors can still become a 502 or 504. Any other body is streamed
// by the server after the handler returns, flushed as it arrives so that
// server-sent events reach the client one by one; an upstream failure
// then cuts the client's connection, the only signal left once the
// status is sent.
func relayBody(rc *fasthttp.RequestCtx, ex *exchange) error {
	r := &ex.resp
	switch n := r.BodyLen; {
	case n == 0: // HEAD, 204, 304, or empty
		ex.release()
		return nil
	case n > 0 && n <= bufferBodyMax:
		if b := r.Buffered(); b != nil { // the usual small answer: one copy
			rc.Response.SetBody(b)
			r.Skip()
			ex.release()
			return nil
		}
		_, err := io.Copy(rc.Response.BodyWriter(), r)
		ex.release()
		return err
	}
	b := responseBodyPool.Get().(*responseBody)
	b.ex = ex
	rc.Response.ImmediateHeaderFlush = true
	rc.Response.SetBodyStream(b, int(max(r.BodyLen, -1)))
	return nil
}

// responseBody is the upstream's body as the body stream of the answer to
// the client. The server reads it through WriteTo, which flushes after
// every read, and closes it with CloseWithError, which ends the exchange
// (its connection back to the pool if the body was read to its end,
// closed otherwise). It is pooled.
type responseBody struct {
	ex *exchange
}

var (
	responseBodyPool = sync.Pool{New: func() any { return new(responseBody) }}
	copyBufPool      = sync.Pool{New: func() any { b := make([]byte, 16<<10); return &b }}
)

func (b *responseBody) Read(p []byte) (int, error) { return b.ex.resp.Read(p) }

// SupportsBodyWriteTo lets fasthttp use WriteTo for both fixed-length and
// chunked framing.
func (b *responseBody) SupportsBodyWriteTo() bool { return true }

// WriteTo copies the body to w, flushing w (when it can) after each read
// so that nothing waits in a buffer for more data from the upstream.
func (b *responseBody) WriteTo(w io.Writer) (int64, error) {
	f, _ := w.(interface{ Flush() error })
	bp := copyBufPool.Get().(*[]byte)
	defer copyBufPool.Put(bp)
	var total int64
	for {
		n, err := b.Read(*bp)
		if n > 0 {
			if _, werr := w.Write((*bp)[:n]); werr != nil {
				return total, werr
			}
			total += int64(n)
			if f != nil {
				if ferr := f.Flush(); ferr != nil {
					return total, ferr
				}
			}
		}
		if errors.Is(err, io.EOF) {
			return total, nil
		}
		if err != nil {
			return total, err
		}
	}
}

// CloseWithError ends the exchange; fasthttp calls it once the body is
// written or the write failed.
func (b *responseBody) CloseWithError(error) error {
	b.ex.release()
	b.ex = nil
	responseBodyPool.Put(b)
	return nil
}
