package bench

import (
	"bytes"
	"errors"
	"fmt"
)

// errMalformed is a response the load generator cannot parse.
var errMalformed = errors.New("bench: malformed HTTP response")

// parseResponse parses the HTTP/1.1 response at the start of b. It returns
// n = 0 if b does not hold all of it yet; otherwise n is its length, with
// its status and whether the server will close the connection. It
// allocates nothing.
func parseResponse(b []byte) (n, status int, closing bool, err error) {
	end := bytes.Index(b, []byte("\r\n\r\n"))
	if end < 0 {
		if len(b) > 64<<10 {
			return 0, 0, false, fmt.Errorf("header over 64 KiB: %w", errMalformed)
		}
		return 0, 0, false, nil
	}
	head := b[:end+2]
	if len(head) < 12 || !bytes.HasPrefix(head, []byte("HTTP/1.")) {
		return 0, 0, false, fmt.Errorf("status line %q: %w", head[:min(len(head), 40)], errMalformed)
	}
	status = atoi(head[9:12])
	length, chunked := -1, false
	head = head[bytes.IndexByte(head, '\n')+1:]
	for len(head) > 0 {
		i := bytes.IndexByte(head, '\n')
		line := bytes.TrimRight(head[:i], "\r")
		head = head[i+1:]
		colon := bytes.IndexByte(line, ':')
		if colon < 0 {
			return 0, status, false, fmt.Errorf("header %q: %w", line, errMalformed)
		}
		name, value := line[:colon], bytes.TrimSpace(line[colon+1:])
		switch {
		case bytes.EqualFold(name, []byte("Content-Length")):
			length = atoi(value)
		case bytes.EqualFold(name, []byte("Transfer-Encoding")):
			chunked = bytes.EqualFold(value, []byte("chunked"))
		case bytes.EqualFold(name, []byte("Connection")):
			closing = bytes.EqualFold(value, []byte("close"))
		}
	}
	body := end + 4
	switch {
	case chunked:
		m, err := chunkedLength(b[body:])
		if m == 0 || err != nil {
			return 0, status, closing, err
		}
		return body + m, status, closing, nil
	case length >= 0:
		if len(b) < body+length {
			return 0, status, closing, nil
		}
		return body + length, status, closing, nil
	case status == 204 || status == 304:
		return body, status, closing, nil
	}
	return 0, status, true, fmt.Errorf("response without a length: %w", errMalformed)
}

// chunkedLength returns the length of the chunked body at the start of b,
// trailers included, or 0 if b does not hold all of it yet.
func chunkedLength(b []byte) (int, error) {
	off := 0
	for {
		i := bytes.IndexByte(b[off:], '\n')
		if i < 0 {
			return 0, nil
		}
		line := b[off : off+i]
		if j := bytes.IndexByte(line, ';'); j >= 0 { // chunk extensions
			line = line[:j]
		}
		size, ok := parseHex(bytes.TrimSpace(line))
		if !ok {
			return 0, fmt.Errorf("chunk size %q: %w", line, errMalformed)
		}
		off += i + 1
		if size == 0 { // trailers, then an empty line
			for {
				k := bytes.IndexByte(b[off:], '\n')
				if k < 0 {
					return 0, nil
				}
				empty := len(bytes.TrimRight(b[off:off+k], "\r")) == 0
				off += k + 1
				if empty {
					return off, nil
				}
			}
		}
		if len(b) < off+size+2 {
			return 0, nil
		}
		off += size + 2
	}
}

func parseHex(b []byte) (int, bool) {
	if len(b) == 0 || len(b) > 15 {
		return 0, false
	}
	n := 0
	for _, c := range b {
		switch {
		case c >= '0' && c <= '9':
			n = n<<4 | int(c-'0')
		case c >= 'a' && c <= 'f':
			n = n<<4 | int(c-'a'+10)
		case c >= 'A' && c <= 'F':
			n = n<<4 | int(c-'A'+10)
		default:
			return 0, false
		}
	}
	return n, true
}

func atoi(b []byte) int {
	n := 0
	for _, c := range b {
		if c < '0' || c > '9' {
			return -1
		}
		n = n*10 + int(c-'0')
	}
	return n
}
