package mcppool

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// This file bounds what one MCP server can make the gateway hold: every
// message it sends (a plain JSON reply, one SSE event, one stdio message) is
// read through a counting reader that fails past Config.MaxMessageBytes,
// so no more than about that many bytes of a message are ever read, and
// the connection is dropped with ErrTooLarge as its status.

// ErrTooLarge: an MCP server sent a message larger than
// Config.MaxMessageBytes; its connection was dropped.
var ErrTooLarge = errors.New("mcp message too large")

// DefaultMaxMessageBytes is Config.MaxMessageBytes's default: 16 MiB.
const DefaultMaxMessageBytes = 16 << 20

// minMaxMessageBytes is the least Config.MaxMessageBytes: below it a
// tool listing would not fit.
const minMaxMessageBytes = 4 << 10

// Config bounds the pool's connections.
type Config struct {
	// MaxMessageBytes bounds one message from an MCP server: a JSON
	// reply, an SSE event, a stdio JSON message (cmd:
	// gateway.mcp_max_message_bytes). Beyond it the connection is
	// dropped and the server's status says why.
	MaxMessageBytes int
}

// DefaultConfig bounds messages at 16 MiB.
func DefaultConfig() Config { return Config{MaxMessageBytes: DefaultMaxMessageBytes} }

// Validate names the first bad field.
func (c Config) Validate() error {
	if c.MaxMessageBytes < minMaxMessageBytes {
		return fmt.Errorf("mcppool: MaxMessageBytes must be >= %d, got %d", minMaxMessageBytes, c.MaxMessageBytes)
	}
	return nil
}

// bound is one connection attempt's message bound: the readers that
// enforce it trip it once, which records the error and calls onTrip
// (set by the pool: cancel the attempt, or drop the session).
type bound struct {
	limit   int
	tripped atomic.Bool
	mu      sync.Mutex
	onTrip  func()
}

func newBound(limit int) *bound { return &bound{limit: limit} }

// err is the error of a tripped bound: what the server's status shows.
func (b *bound) err() error {
	return fmt.Errorf("%w: the server sent a message over %d bytes (gateway.mcp_max_message_bytes); connection dropped", ErrTooLarge, b.limit)
}

// trip records that a message went past the limit, once.
func (b *bound) trip() error {
	if b.tripped.CompareAndSwap(false, true) {
		b.mu.Lock()
		f := b.onTrip
		b.mu.Unlock()
		if f != nil {
			f()
		}
	}
	return b.err()
}

// setOnTrip sets what a trip does from now on; if the bound tripped
// already, f runs at once.
func (b *bound) setOnTrip(f func()) {
	b.mu.Lock()
	b.onTrip = f
	b.mu.Unlock()
	if b.tripped.Load() && f != nil {
		f()
	}
}

// explain replaces err with the bound's error when the bound tripped
// (the SDK's wording of a failed read is not one an operator can act on).
func (b *bound) explain(err error) error {
	if b != nil && b.tripped.Load() {
		return b.err()
	}
	return err
}

// bodyReader bounds a plain (JSON) response body: the whole body is one
// message.
type bodyReader struct {
	rc io.ReadCloser
	b  *bound
	n  int
}

func (r *bodyReader) Read(p []byte) (int, error) {
	if r.b.tripped.Load() {
		return 0, r.b.err()
	}
	if room := r.b.limit + 1 - r.n; len(p) > room {
		p = p[:room] // never read more than one byte past the limit
	}
	n, err := r.rc.Read(p)
	r.n += n
	if r.n > r.b.limit {
		return 0, r.b.trip()
	}
	return n, err
}

func (r *bodyReader) Close() error { return r.rc.Close() }

// eventReader bounds each event of an SSE stream: the bytes of its
// lines up to the empty line that ends it. Lines end in \n, \r\n or \r.
type eventReader struct {
	rc      io.ReadCloser
	b       *bound
	n       int  // bytes of the current event
	lineLen int  // bytes of the current line, its end excluded
	cr      bool // the last byte was \r (a \n after it ends no new line)
}

func (r *eventReader) Read(p []byte) (int, error) {
	if r.b.tripped.Load() {
		return 0, r.b.err()
	}
	n, err := r.rc.Read(p)
	for _, c := range p[:n] {
		if c == '\n' && r.cr {
			r.cr = false
			continue
		}
		r.cr = c == '\r'
		switch {
		case (c == '\n' || c == '\r') && r.lineLen == 0:
			r.n = 0 // an empty line: the event ends
			continue
		case c == '\n' || c == '\r':
			r.lineLen = 0
		default:
			r.lineLen++
		}
		if r.n++; r.n > r.b.limit {
			return 0, r.b.trip()
		}
	}
	return n, err
}

func (r *eventReader) Close() error { return r.rc.Close() }

// valueReader bounds each JSON value of a stream of them (the stdio
// transport's messages: one per line, but a value may span lines): the
// bytes from a value's first byte to its closing bracket.
type valueReader struct {
	rc       io.ReadCloser
	b        *bound
	n        int // bytes of the current value
	depth    int
	inString bool
	escaped  bool
}

func (r *valueReader) Read(p []byte) (int, error) {
	if r.b.tripped.Load() {
		return 0, r.b.err()
	}
	n, err := r.rc.Read(p)
	for _, c := range p[:n] {
		if r.n++; r.n > r.b.limit {
			return 0, r.b.trip()
		}
		switch {
		case r.escaped:
			r.escaped = false
		case r.inString:
			r.escaped, r.inString = c == '\\', c != '"'
		case c == '"':
			r.inString = true
		case c == '{' || c == '[':
			r.depth++
		case c == '}' || c == ']':
			if r.depth--; r.depth <= 0 {
				r.depth, r.n = 0, 0 // the value ends
			}
		case r.depth == 0 && (c == '\n' || c == '\r' || c == ' ' || c == '\t'):
			r.n = 0 // between values
		}
	}
	return n, err
}

func (r *valueReader) Close() error { return r.rc.Close() }

// limitTransport adds a server's headers to every request and bounds
// every response's messages: an SSE stream per event, any other body
// whole.
type limitTransport struct {
	headers map[string]string
	b       *bound
}

func (t limitTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if len(t.headers) > 0 {
		r = r.Clone(r.Context())
		for k, v := range t.headers {
			r.Header.Set(k, v)
		}
	}
	resp, err := http.DefaultTransport.RoundTrip(r)
	if err != nil {
		return nil, err
	}
	if strings.HasPrefix(strings.ToLower(resp.Header.Get("Content-Type")), "text/event-stream") {
		resp.Body = &eventReader{rc: resp.Body, b: t.b}
	} else {
		resp.Body = &bodyReader{rc: resp.Body, b: t.b}
	}
	return resp, nil
}

// stdioTransport is the SDK's CommandTransport with its server's stdout
// read through a valueReader: each message is bounded.
type stdioTransport struct {
	cmd *exec.Cmd
	b   *bound
}

func (t *stdioTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	stdout, err := t.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	stdin, err := t.cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	if err := t.cmd.Start(); err != nil {
		return nil, err
	}
	tr := &mcp.IOTransport{
		Reader: &valueReader{rc: io.NopCloser(stdout), b: t.b}, // closing stdin ends the server, not closing stdout
		Writer: &stdinCloser{WriteCloser: stdin, cmd: t.cmd, b: t.b},
		// The SDK's own cap, above ours so that ours speaks first.
		MaxLineLength: 2*t.b.limit + 64<<10,
	}
	return tr.Connect(ctx)
}

// stdinCloser ends a stdio server as the SDK's CommandTransport does:
// close its stdin, give it a second to exit, then kill its process group
// (at once if it sent a message too large: it is not listening).
type stdinCloser struct {
	io.WriteCloser
	cmd *exec.Cmd
	b   *bound
}

func (w *stdinCloser) Close() error {
	err := w.WriteCloser.Close()
	done := make(chan error, 1)
	go func() { done <- w.cmd.Wait() }()
	grace := time.Second
	if w.b.tripped.Load() {
		grace = 0
	}
	select {
	case werr := <-done:
		return errors.Join(err, exitErr(werr))
	case <-time.After(grace):
	}
	_ = syscall.Kill(-w.cmd.Process.Pid, syscall.SIGKILL)
	return errors.Join(err, exitErr(<-done))
}

// exitErr drops the exit status of a server that was told to stop.
func exitErr(err error) error {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return nil
	}
	return err
}
