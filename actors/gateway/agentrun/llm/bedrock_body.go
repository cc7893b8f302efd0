package llm

import (
	"encoding/binary"
	"io"
	"net/http"
	"strings"
)

// bedrockHTTP is the SDK's HTTP client: cfg.HTTP (the shared pool) with
// every answer's body bounded. A whole answer (JSON, an error) fails with
// TooLarge past BodyLimit; an event stream is bounded per frame instead
// (its total is bounded by the caller's delta accounting, and a real
// stream's framing and "p" padding weigh many times its text), so no
// single frame the SDK buffers can exceed BodyLimit either.
type bedrockHTTP struct {
	c         *http.Client
	maxAnswer int
}

// Do sends r through the shared client and wraps the answer's body.
func (h *bedrockHTTP) Do(r *http.Request) (*http.Response, error) {
	if r.Body != nil && r.Body != http.NoBody {
		// The SDK closes the request body as soon as the answer's
		// headers arrive, and its body's WriteTo then fails with
		// io.EOF; net/http's last read of a body (its check for bytes
		// past Content-Length) can come after that, takes the io.EOF
		// from WriteTo for a write error and closes the connection
		// under the answer being streamed ("use of closed network
		// connection", about 1 stream in 25 on loopback). Hiding
		// WriteTo makes that read a plain Read, whose io.EOF is clean.
		r.Body = bedrockReqBody{r.Body}
	}
	resp, err := h.c.Do(r)
	if err != nil {
		return nil, err
	}
	limit := BodyLimit(h.maxAnswer)
	if resp.StatusCode/100 == 2 && strings.HasPrefix(resp.Header.Get("Content-Type"), "application/vnd.amazon.eventstream") {
		resp.Body = &bedrockFrameBody{ReadCloser: resp.Body, max: limit, maxAnswer: h.maxAnswer}
	} else {
		resp.Body = &limitBody{ReadCloser: resp.Body, left: limit, maxAnswer: h.maxAnswer}
	}
	return resp, nil
}

// bedrockFrameBody watches the event-stream frames passing through it
// (each starts with its total length, big-endian uint32) and fails with
// TooLarge on a frame longer than max, before the decoder buffers it.
type bedrockFrameBody struct {
	io.ReadCloser
	max       int64
	maxAnswer int
	rem       int64 // bytes left of the current frame after its length
	pre       [4]byte
	preN      int
	err       error
}

func (b *bedrockFrameBody) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	n, err := b.ReadCloser.Read(p)
	for i := 0; i < n; {
		if b.rem > 0 {
			k := min(b.rem, int64(n-i))
			b.rem -= k
			i += int(k)
			continue
		}
		b.pre[b.preN] = p[i]
		b.preN++
		i++
		if b.preN == 4 {
			b.preN = 0
			total := int64(binary.BigEndian.Uint32(b.pre[:]))
			if total > b.max {
				b.err = TooLarge(b.maxAnswer)
				return 0, b.err
			}
			b.rem = max(total-4, 0)
		}
	}
	return n, err
}

// bedrockReqBody is a request body without its WriteTo (see Do).
type bedrockReqBody struct{ io.ReadCloser }
