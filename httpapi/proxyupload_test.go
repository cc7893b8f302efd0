package httpapi

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestProxyStreamsUploads sends request bodies past the buffered size,
// with a length and chunked, and checks they arrive intact.
func TestProxyStreamsUploads(t *testing.T) {
	w := newTestEnv(t, withStream(16<<20))
	tests := []struct {
		name    string
		size    int
		chunked bool
		want    string // the upstream's view of the framing
	}{
		{"small with length", 1000, false, ""},
		{"small chunked", 1000, true, "chunked"}, // no length: streamed
		{"12 MiB with length", 12 << 20, false, ""},
		{"12 MiB chunked", 12 << 20, true, "chunked"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var body io.Reader = io.LimitReader(&pattern{}, int64(tt.size))
			if tt.chunked {
				body = struct{ io.Reader }{body} // hides the length from net/http
			}
			req := w.request(t, "POST", "/api/proxy/stream/v1/upload", body)
			if !tt.chunked {
				req.ContentLength = int64(tt.size)
			}
			resp, err := w.hc.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			got, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if want := fmt.Sprintf("%d %s %s", tt.size, patternSum(tt.size), tt.want); resp.StatusCode != 200 || string(got) != want {
				t.Errorf("upstream saw %d %q, want %q", resp.StatusCode, got, want)
			}
		})
	}
}

// TestProxyUploadReachesUpstreamEarly checks that a chunked upload is
// passed on as it arrives: the upstream reads its first bytes while the
// client still holds the rest back.
func TestProxyUploadReachesUpstreamEarly(t *testing.T) {
	w := newTestEnv(t, withStream(16<<20))
	pr, pw := io.Pipe()
	req := w.request(t, "POST", "/api/proxy/stream/v1/upload", pr)
	done := make(chan *http.Response, 1)
	go func() {
		resp, err := w.hc.Do(req)
		if err != nil {
			t.Error(err)
		}
		done <- resp
	}()
	first := bytes.Repeat([]byte("x"), 100<<10)
	if _, err := pw.Write(first); err != nil {
		t.Fatal(err)
	}
	select {
	case n := <-w.stream.got:
		if n <= 0 {
			t.Fatalf("upstream progress %d", n)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("upstream saw nothing while the client held the rest: the proxy buffers uploads")
	}
	if _, err := pw.Write(first); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	resp := <-done
	if resp == nil {
		return
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.HasPrefix(string(got), fmt.Sprint(200<<10)+" ") {
		t.Errorf("upstream saw %q, want %d bytes", got, 200<<10)
	}
}

// TestProxyUploadLimits: a body over MaxProxyBodyBytes is 413, whether
// its length says so up front or a chunked body grows past it.
func TestProxyUploadLimits(t *testing.T) {
	w := newTestEnv(t, withStream(1<<20))
	for _, chunked := range []bool{false, true} {
		var body io.Reader = io.LimitReader(&pattern{}, 3<<20)
		if chunked {
			body = struct{ io.Reader }{body}
		}
		req := w.request(t, "POST", "/api/proxy/stream/v1/upload", body)
		if !chunked {
			req.ContentLength = 3 << 20
		}
		resp, err := w.hc.Do(req)
		if err != nil {
			// The proxy may answer and close before the client has sent
			// everything; then the client reports the broken write.
			t.Logf("chunked=%v: %v", chunked, err)
			continue
		}
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 413 || !bytes.Contains(got, []byte(codeTooLarge)) || !resp.Close {
			t.Errorf("chunked=%v: %d %s (close %v), want 413 and a closed connection", chunked, resp.StatusCode, got, resp.Close)
		}
	}
}

// TestUnreadBodyKeepsConnectionsInSync sends requests whose bodies the
// server refuses without reading them, then another request on the same
// connection: it must be read as a request, not as the old body's rest.
func TestUnreadBodyKeepsConnectionsInSync(t *testing.T) {
	w := newTestEnv(t, withStream(1<<20))
	tests := []struct {
		name      string
		path      string
		headers   string
		body      string
		status    int
		wantClose bool
	}{
		{"small body, bad key", "/api/proxy/stream/v1/upload", "X-API-Key: svc_live_bad\r\nContent-Length: 5000\r\n", strings.Repeat("G", 5000), 401, false},
		{"small body, validate", "/api/keys/validate", "X-API-Key: " + w.secret + "\r\nContent-Length: 5000\r\n", strings.Repeat("G", 5000), 200, false},
		{"large body, bad key", "/api/proxy/stream/v1/upload", "X-API-Key: svc_live_bad\r\nContent-Length: 200000\r\n", strings.Repeat("G", 200000), 401, true},
		{"chunked body, no key", "/api/proxy/stream/v1/upload", "Transfer-Encoding: chunked\r\n", "5\r\nGET /\r\n0\r\n\r\n", 401, true},
		{"large JSON body", "/api/keys", "Content-Length: 100000\r\n", strings.Repeat(" ", 100000), 413, true},
		{"chunked JSON body over limit", "/api/auth/login", "Transfer-Encoding: chunked\r\n", "11170\r\n" + strings.Repeat(" ", 0x11170) + "\r\n0\r\n\r\n", 413, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			conn := w.dial(t)
			go func() {
				fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: %s\r\n%s\r\n%s", tt.path, testHost, tt.headers, tt.body)
				fmt.Fprintf(conn, "GET /health HTTP/1.1\r\nHost: %s\r\n\r\n", testHost)
			}()
			_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
			br := bufio.NewReader(conn)
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			if resp.StatusCode != tt.status || resp.Close != tt.wantClose {
				t.Fatalf("first answer %d (close %v), want %d (close %v)", resp.StatusCode, resp.Close, tt.status, tt.wantClose)
			}
			if tt.wantClose {
				return
			}
			resp, err = http.ReadResponse(br, nil)
			if err != nil || resp.StatusCode != 200 {
				t.Fatalf("second request on the connection = %v, %v; want 200 from /health", resp, err)
			}
		})
	}
}
