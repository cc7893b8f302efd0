package relay

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"
)

// FuzzParseHead checks ParseHead against net/http's response reader on
// arbitrary bytes: it never panics nor reads past the block it reports;
// a block it accepts, net/http accepts with the same status; and the
// header lines it yields are the block's, each a token name and a value
// free of control bytes.
func FuzzParseHead(f *testing.F) {
	for _, s := range []string{
		"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
		"HTTP/1.0 204 No Content\r\nConnection: keep-alive\r\n\r\n",
		"HTTP/1.1 100 Continue\r\n\r\n",
		"HTTP/1.1 200\nX: y\n\n",
		"HTTP/1.1 200 OK\r\nContent-Length: 1, 1\r\nX-A:\t v \r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
		"HTTP/1.1 200 OK\r\nX: a\r\n b\r\n\r\n",
	} {
		f.Add([]byte(s), false)
	}
	f.Fuzz(func(t *testing.T, b []byte, head bool) {
		h, n, err := ParseHead(b, head)
		if err != nil {
			return
		}
		if n <= 0 || n > len(b) {
			t.Fatalf("consumed %d of %d bytes", n, len(b))
		}
		if h.Status < 100 || h.Status > 999 {
			t.Fatalf("status %d", h.Status)
		}
		if head && h.BodyLen != 0 {
			t.Fatalf("a HEAD's answer framed %d", h.BodyLen)
		}
		if h.BodyLen < UntilClose || h.BodyLen == UntilClose && !h.Close {
			t.Fatalf("framing %d, close %v", h.BodyLen, h.Close)
		}
		if len(h.Lines) > 0 && !bytes.Contains(b[:n], h.Lines) {
			t.Fatal("Lines outside the block")
		}
		lines := 0
		for k, v := range Headers(h.Lines) {
			lines++
			for _, c := range k {
				if !isToken(c) {
					t.Fatalf("name %q", k)
				}
			}
			for _, c := range v {
				if c < ' ' && c != '\t' || c == 0x7f {
					t.Fatalf("value %q", v)
				}
			}
		}
		if want := bytes.Count(h.Lines, []byte("\n")); lines != want {
			t.Fatalf("%d header lines yielded of %d", lines, want)
		}
		// net/http agrees that this is a response, with this status.
		// (It reads a 1xx as it comes; it is stricter about nothing that
		// matters here but tolerates more, so only one direction holds.)
		req, _ := http.NewRequest("GET", "http://x/", nil)
		if head {
			req.Method = "HEAD"
		}
		resp, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(b[:n])), req)
		if err != nil {
			if e := strings.ToLower(err.Error()); strings.Contains(e, "malformed mime header") || strings.Contains(e, "transfer") ||
				strings.Contains(e, "content-length") || strings.Contains(e, "content length") || err == io.ErrUnexpectedEOF {
				return // a stricter reading of a header net/http checks differently
			}
			t.Fatalf("net/http refuses %q: %v", b[:n], err)
		}
		resp.Body.Close()
		if resp.StatusCode != h.Status {
			t.Fatalf("status %d, net/http %d", h.Status, resp.StatusCode)
		}
	})
}

// TestParseHeadNeedsMore: a block without its end is incomplete at every
// cut, never misread.
func TestParseHeadNeedsMore(t *testing.T) {
	full := "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nX-A: b\r\n\r\n"
	for i := range len(full) - 1 {
		if _, _, err := ParseHead([]byte(full[:i]), false); err != errNeedMore && err != ErrMalformed {
			t.Errorf("cut at %d: %v", i, err)
		}
	}
	h, n, err := ParseHead([]byte(full+"hello"), false)
	if err != nil || n != len(full) || h.BodyLen != 5 {
		t.Fatalf("= %+v, %d, %v", h, n, err)
	}
}
