package relay

import (
	"bytes"
	"errors"
)

// Framing of a response body (Head.BodyLen).
const (
	Chunked     = -1 // Transfer-Encoding: chunked
	UntilClose  = -2 // no length: the body ends when the upstream closes
	noLength    = -1 // Head.ContentLength: no Content-Length header
	maxHeadSize = 16 << 10
)

var (
	// ErrMalformed is an answer that is not valid HTTP/1.x: a bad status
	// line, header line or framing.
	ErrMalformed = errors.New("relay: malformed response")
	// errNeedMore: the buffer holds no complete header block yet.
	errNeedMore = errors.New("relay: incomplete header block")
)

// Head is a parsed response header block. Lines aliases the buffer it was
// parsed from: the header lines after the status line, each ending in
// "\n" (mostly "\r\n"), without the empty line that ends the block.
type Head struct {
	Status int
	Reason []byte
	Lines  []byte
	// ContentLength is the Content-Length header's value, -1 without one
	// (or when Transfer-Encoding overrides it).
	ContentLength int64
	// BodyLen is how the body is framed: its length (0: none), Chunked or
	// UntilClose.
	BodyLen int64
	// Close: the connection carries no further exchange.
	Close bool
}

// ParseHead parses the response header block at the start of b, for a
// request that was a HEAD if head is set (its answer has no body). It
// returns the block's length; errNeedMore if b holds no complete block.
// Line ends may be CRLF or a bare LF; a folded line, a space before the
// colon, a control byte in a value, a bad Content-Length, two differing
// ones, or a Transfer-Encoding other than one ending in chunked (which is
// read until close) is ErrMalformed.
func ParseHead(b []byte, head bool) (h Head, n int, err error) {
	i := bytes.IndexByte(b, '\n')
	if i < 0 {
		return h, 0, errNeedMore
	}
	line := trimCR(b[:i])
	n = i + 1
	// HTTP/1.x SSS[ reason]
	if len(line) < 12 || string(line[:7]) != "HTTP/1." || (line[7] != '0' && line[7] != '1') || line[8] != ' ' {
		return h, 0, ErrMalformed
	}
	http10 := line[7] == '0'
	for _, c := range line[9:12] {
		if c < '0' || c > '9' {
			return h, 0, ErrMalformed
		}
		h.Status = h.Status*10 + int(c-'0')
	}
	if h.Status < 100 {
		return h, 0, ErrMalformed
	}
	if len(line) > 12 {
		if line[12] != ' ' {
			return h, 0, ErrMalformed
		}
		h.Reason = line[13:]
		for _, c := range h.Reason {
			if c < ' ' && c != '\t' || c == 0x7f {
				return h, 0, ErrMalformed
			}
		}
	}
	h.ContentLength = noLength
	start := n
	var te, keepAlive bool
	teChunked := false
	for {
		i := bytes.IndexByte(b[n:], '\n')
		if i < 0 {
			return h, 0, errNeedMore
		}
		line := trimCR(b[n : n+i])
		if len(line) == 0 {
			h.Lines = b[start:n]
			n += i + 1
			break
		}
		n += i + 1
		k, v, ok := splitHeader(line)
		if !ok {
			return h, 0, ErrMalformed
		}
		switch {
		case equalFold(k, "content-length"):
			cl, ok := parseLength(v)
			if !ok || h.ContentLength >= 0 && cl != h.ContentLength {
				return h, 0, ErrMalformed
			}
			h.ContentLength = cl
		case equalFold(k, "transfer-encoding"):
			te = true
			// The last coding decides: chunked, or the body runs to the
			// connection's close (RFC 9112 §6.3).
			teChunked = equalFold(lastToken(v), "chunked")
			if len(lastToken(v)) == 0 {
				return h, 0, ErrMalformed
			}
		case equalFold(k, "connection"):
			for tok := range Tokens(v) {
				switch {
				case equalFold(tok, "close"):
					h.Close = true
				case equalFold(tok, "keep-alive"):
					keepAlive = true
				}
			}
		}
	}
	if http10 && !keepAlive {
		h.Close = true
	}
	switch {
	case head || h.Status < 200 || h.Status == 204 || h.Status == 304:
		h.BodyLen = 0
	case te:
		// Transfer-Encoding overrides Content-Length; a message carrying
		// both is suspect, and its connection not reused.
		if h.ContentLength >= 0 {
			h.Close = true
		}
		h.ContentLength = noLength
		h.BodyLen = UntilClose
		if teChunked {
			h.BodyLen = Chunked
		}
	case h.ContentLength >= 0:
		h.BodyLen = h.ContentLength
	default:
		h.BodyLen = UntilClose
	}
	if h.BodyLen == UntilClose {
		h.Close = true
	}
	return h, n, nil
}

// Headers calls yield with each header line's name and value (trimmed),
// in order, until it returns false. lines is Head.Lines: ParseHead
// checked every line, so they are only split here.
func Headers(lines []byte) func(yield func(k, v []byte) bool) {
	return func(yield func(k, v []byte) bool) {
		for len(lines) > 0 {
			i := bytes.IndexByte(lines, '\n')
			if i < 0 {
				i = len(lines) - 1
			}
			line := trimCR(lines[:i])
			lines = lines[i+1:]
			c := bytes.IndexByte(line, ':')
			if c <= 0 {
				continue // not from ParseHead
			}
			if !yield(line[:c], TrimOWS(line[c+1:])) {
				return
			}
		}
	}
}

func trimCR(b []byte) []byte {
	if len(b) > 0 && b[len(b)-1] == '\r' {
		return b[:len(b)-1]
	}
	return b
}

// splitHeader splits "name: value": the name a token, the value trimmed
// of spaces and tabs and free of control bytes other than tab.
func splitHeader(line []byte) (k, v []byte, ok bool) {
	c := bytes.IndexByte(line, ':')
	if c <= 0 {
		return nil, nil, false
	}
	k = line[:c]
	for _, ch := range k {
		if !isToken(ch) {
			return nil, nil, false
		}
	}
	v = TrimOWS(line[c+1:])
	for _, ch := range v {
		if ch < ' ' && ch != '\t' || ch == 0x7f {
			return nil, nil, false
		}
	}
	return k, v, true
}

func isToken(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	switch c {
	case '!', '#', '$', '%', '&', '\'', '*', '+', '-', '.', '^', '_', '`', '|', '~':
		return true
	}
	return false
}

// TrimOWS trims b of the optional white space (spaces and tabs) around
// an HTTP field value or list element.
func TrimOWS(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t') {
		b = b[1:]
	}
	for len(b) > 0 && (b[len(b)-1] == ' ' || b[len(b)-1] == '\t') {
		b = b[:len(b)-1]
	}
	return b
}

// parseLength parses a Content-Length value: decimal digits, or a list of
// equal ones ("42, 42", as some intermediaries merge them).
func parseLength(v []byte) (int64, bool) {
	n := int64(-1)
	for tok := range Tokens(v) {
		if len(tok) == 0 || len(tok) > 18 {
			return 0, false
		}
		var m int64
		for _, c := range tok {
			if c < '0' || c > '9' {
				return 0, false
			}
			m = m*10 + int64(c-'0')
		}
		if n >= 0 && m != n {
			return 0, false
		}
		n = m
	}
	return n, n >= 0
}

// Tokens yields the non-empty comma-separated elements of v (an HTTP
// list), trimmed.
func Tokens(v []byte) func(yield func([]byte) bool) {
	return func(yield func([]byte) bool) {
		for len(v) > 0 {
			i := bytes.IndexByte(v, ',')
			var tok []byte
			if i < 0 {
				tok, v = v, nil
			} else {
				tok, v = v[:i], v[i+1:]
			}
			if t := TrimOWS(tok); len(t) > 0 && !yield(t) {
				return
			}
		}
	}
}

func lastToken(v []byte) []byte {
	var last []byte
	for tok := range Tokens(v) {
		last = tok
	}
	return last
}

// equalFold reports whether b equals the lower-case ASCII s, ignoring
// the case of b.
func equalFold(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := range len(b) {
		c := b[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != s[i] {
			return false
		}
	}
	return true
}
