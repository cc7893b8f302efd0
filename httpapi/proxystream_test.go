package httpapi

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// streamUpstream is a net/http upstream for the streaming tests: another
// HTTP implementation than the proxy's, on real loopback TCP.
type streamUpstream struct {
	*httptest.Server
	release  chan struct{} // closed by the test: /events may finish
	finished chan struct{} // closed by /events after its last event
	got      chan int64    // /upload: bytes received so far, per read
	gone     chan struct{} // /ticker: closed when its client went away
	hits     atomic.Int64  // requests received
}

func (u *streamUpstream) count() int64 { return u.hits.Load() }

func newStreamUpstream(tb testing.TB) *streamUpstream {
	tb.Helper()
	u := &streamUpstream{release: make(chan struct{}), finished: make(chan struct{}), got: make(chan int64, 1024), gone: make(chan struct{})}
	mux := http.NewServeMux()
	mux.HandleFunc("/base/v1/events", u.events)
	mux.HandleFunc("/base/v1/upload", u.upload)
	mux.HandleFunc("/base/v1/download", download)
	mux.HandleFunc("/base/v1/broken", broken)
	mux.HandleFunc("/base/v1/ticker", u.ticker)
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.hits.Add(1)
		mux.ServeHTTP(w, r)
	}))
	tb.Cleanup(func() {
		select {
		case <-u.release:
		default:
			close(u.release)
		}
		u.Close()
	})
	return u
}

// events sends one server-sent event, waits for the test's release, then
// sends two more, as an LLM upstream streams tokens.
func (u *streamUpstream) events(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	fmt.Fprint(w, "data: {\"n\":1}\n\n")
	w.(http.Flusher).Flush()
	select {
	case <-u.release:
	case <-r.Context().Done():
		return
	}
	fmt.Fprint(w, "data: {\"n\":2}\n\n")
	w.(http.Flusher).Flush()
	fmt.Fprint(w, "data: [DONE]\n\n")
	close(u.finished)
}

// ticker streams an event every 20 ms until its client goes away, then
// closes u.gone.
func (u *streamUpstream) ticker(w http.ResponseWriter, r *http.Request) {
	defer close(u.gone)
	w.Header().Set("Content-Type", "text/event-stream")
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for i := 0; ; i++ {
		if _, err := fmt.Fprintf(w, "data: {\"n\":%d}\n\n", i); err != nil {
			return
		}
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
			return
		case <-t.C:
		}
	}
}

// upload answers the length and SHA-256 of the request body, reporting
// its progress on u.got as it reads.
func (u *streamUpstream) upload(w http.ResponseWriter, r *http.Request) {
	h := sha256.New()
	buf := make([]byte, 32<<10)
	var n int64
	for {
		m, err := r.Body.Read(buf)
		h.Write(buf[:m])
		n += int64(m)
		if m > 0 {
			select {
			case u.got <- n:
			default:
			}
		}
		if err != nil {
			if err != io.EOF {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			break
		}
	}
	fmt.Fprintf(w, "%d %x %s", n, h.Sum(nil), r.Header.Get("Transfer-Encoding")+strings.Join(r.TransferEncoding, ","))
}

// download answers ?size= bytes of a repeating pattern, with a
// Content-Length unless ?chunked=1.
func download(w http.ResponseWriter, r *http.Request) {
	size, _ := strconv.Atoi(r.URL.Query().Get("size"))
	if r.URL.Query().Get("chunked") == "" {
		w.Header().Set("Content-Length", strconv.Itoa(size))
	}
	_, _ = io.Copy(w, io.LimitReader(&pattern{}, int64(size)))
}

// broken promises ?size= bytes, sends half and drops the connection.
func broken(w http.ResponseWriter, r *http.Request) {
	size, _ := strconv.Atoi(r.URL.Query().Get("size"))
	w.Header().Set("Content-Length", strconv.Itoa(size))
	_, _ = io.Copy(w, io.LimitReader(&pattern{}, int64(size/2)))
	w.(http.Flusher).Flush()
	conn, _, err := w.(http.Hijacker).Hijack()
	if err == nil {
		conn.Close()
	}
}

// pattern is an endless reader of the alphabet, over and over.
type pattern struct{ off int }

func (r *pattern) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte('a' + (r.off+i)%26)
	}
	r.off += len(p)
	return len(p), nil
}

func patternSum(size int) string {
	h := sha256.New()
	_, _ = io.Copy(h, io.LimitReader(&pattern{}, int64(size)))
	return hex.EncodeToString(h.Sum(nil))
}

// TestProxyStreamsEvents checks that server-sent events are relayed one by
// one: the first event reaches the client while the upstream is still
// holding the rest back.
func TestProxyStreamsEvents(t *testing.T) {
	w := newTestEnv(t, withStream(DefaultMaxProxyBodyBytes))
	resp, err := w.hc.Do(w.request(t, "GET", "/api/proxy/stream/v1/events", nil))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" ||
		resp.Header.Get("X-RateLimit-Limit") != "10000" || resp.ContentLength != -1 {
		t.Fatalf("answer = %d %v (length %d)", resp.StatusCode, resp.Header, resp.ContentLength)
	}
	br := bufio.NewReader(resp.Body)
	first := make(chan string, 1)
	go func() {
		line, _ := br.ReadString('\n')
		first <- line
	}()
	select {
	case line := <-first:
		if line != "data: {\"n\":1}\n" {
			t.Fatalf("first event = %q", line)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("first event not relayed while the upstream holds the rest: the proxy buffers")
	}
	select {
	case <-w.stream.finished:
		t.Fatal("upstream finished before it was released")
	default:
	}
	close(w.stream.release)
	rest, err := io.ReadAll(br)
	if err != nil {
		t.Fatal(err)
	}
	if want := "\ndata: {\"n\":2}\n\ndata: [DONE]\n\n"; string(rest) != want {
		t.Errorf("rest of the stream = %q, want %q", rest, want)
	}
	u, err := w.sys.KeyUsage(context.Background(), w.keyIDOf(t, w.secret), 1)
	if err != nil || u.Total != 1 {
		t.Errorf("usage = %+v, %v; want 1", u, err)
	}
}

// TestProxyStreamsDownloads relays bodies past the buffered size, with and
// without a length, and small ones, which are buffered when they have one.
func TestProxyStreamsDownloads(t *testing.T) {
	w := newTestEnv(t, withStream(DefaultMaxProxyBodyBytes))
	tests := []struct {
		name    string
		size    int
		chunked bool
	}{
		{"small with length", 1024, false},
		{"small chunked", 1024, true},
		{"at buffer limit", bufferBodyMax, false},
		{"40 MiB with length", 40 << 20, false},
		{"9 MiB chunked", 9 << 20, true},
		{"empty", 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := fmt.Sprintf("/api/proxy/stream/v1/download?size=%d", tt.size)
			if tt.chunked {
				path += "&chunked=1"
			}
			resp, err := w.hc.Do(w.request(t, "GET", path, nil))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			h := sha256.New()
			n, err := io.Copy(h, resp.Body)
			if err != nil || n != int64(tt.size) || hex.EncodeToString(h.Sum(nil)) != patternSum(tt.size) {
				t.Fatalf("body: %d bytes, %v; want %d intact bytes", n, err, tt.size)
			}
			wantLength := int64(tt.size)
			if tt.chunked {
				wantLength = -1 // no length to pass on: streamed as it came
			}
			if resp.ContentLength != wantLength || resp.Header.Get("X-RateLimit-Remaining") == "" {
				t.Errorf("length %d (want %d), headers %v", resp.ContentLength, wantLength, resp.Header)
			}
		})
	}
}

// TestProxyHead: a HEAD has no body to stream, only the upstream's length.
func TestProxyHead(t *testing.T) {
	w := newTestEnv(t, withStream(DefaultMaxProxyBodyBytes))
	for range 2 { // the second rides the same upstream connection
		resp, err := w.hc.Do(w.request(t, "HEAD", "/api/proxy/stream/v1/download?size=100000", nil))
		if err != nil {
			t.Fatal(err)
		}
		n, _ := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || resp.ContentLength != 100000 || n != 0 || resp.Header.Get("X-RateLimit-Limit") == "" {
			t.Errorf("HEAD = %d, length %d, %d body bytes, %v", resp.StatusCode, resp.ContentLength, n, resp.Header)
		}
	}
}

// TestProxyUpstreamBreaks: a small body that breaks off is still a 502
// (nothing was sent yet); a streamed one can only cut the connection.
func TestProxyUpstreamBreaks(t *testing.T) {
	w := newTestEnv(t, withStream(DefaultMaxProxyBodyBytes))
	resp, err := w.hc.Do(w.request(t, "GET", "/api/proxy/stream/v1/broken?size=2000", nil))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 502 || !bytes.Contains(body, []byte(codeUpstreamDown)) || resp.Header.Get("X-RateLimit-Limit") == "" {
		t.Errorf("small broken body = %d %s %v", resp.StatusCode, body, resp.Header)
	}

	resp, err = w.hc.Do(w.request(t, "GET", "/api/proxy/stream/v1/broken?size=1000000", nil))
	if err != nil {
		t.Fatal(err)
	}
	n, err := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || err == nil || n >= 1000000 {
		t.Errorf("large broken body = %d, read %d bytes, err %v; want a cut stream", resp.StatusCode, n, err)
	}
	u, err := w.sys.KeyUsage(context.Background(), w.keyIDOf(t, w.secret), 1)
	if err != nil || u.Total != 2 {
		t.Errorf("usage = %+v, %v; want 2 (admitted requests count)", u, err)
	}
}
