// Package relay is the proxy's HTTP/1.1 client side: a keep-alive pool of
// connections to one upstream, requests written from header bytes the
// caller prepared (no header object is built and serialized again), and
// answers whose header block is parsed in the connection's read buffer
// and whose body is passed on as the bytes that came, framed by
// Content-Length, chunked encoding or the upstream's close.
//
// The package knows framing and connections, nothing of gatehouse's
// policy: which headers go upstream and which come back is the caller's
// (httpapi's proxy). Timeouts are the connection's: before each exchange
// the relay calls SetWriteDeadline(time.Time{}) on it, which lifts
// whatever deadline the previous exchange left (httpapi's deadline wheel
// starts an exchange's clock there and on its first write).
package relay

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults of Config.
const (
	DefaultMaxConns    = 512
	DefaultIdleTimeout = 10 * time.Second
	maxAttempts        = 5 // of an idempotent request (fasthttp's default)
	maxInterim         = 100
)

var (
	// ErrNoFreeConns: every connection was busy for MaxConnWait.
	ErrNoFreeConns = errors.New("relay: no free connection to the upstream")
	// ErrConnectionClosed: the upstream closed the connection before the
	// first byte of an answer.
	ErrConnectionClosed = errors.New("relay: upstream closed the connection before answering")
)

// Config configures a Pool.
type Config struct {
	// Dial opens a new connection to the upstream (TLS included).
	Dial func() (net.Conn, error)
	// MaxConns bounds the connections open at once (0: DefaultMaxConns).
	MaxConns int
	// MaxConnWait is how long a request waits for a connection when
	// MaxConns are busy before failing with ErrNoFreeConns.
	MaxConnWait time.Duration
	// IdleTimeout closes a connection idle for longer, give or take a
	// quarter of it more (0: DefaultIdleTimeout).
	IdleTimeout time.Duration
}

// Pool is a keep-alive pool of connections to one upstream. It is safe
// for concurrent use.
type Pool struct {
	cfg     Config
	idle    chan *conn    // kept-alive connections, oldest first
	sem     chan struct{} // one token per open connection
	closed  atomic.Bool   // Close was called: connections are not kept
	done    chan struct{} // closed by Close: the sweeper stops at once
	once    sync.Once
	sweeper atomic.Bool // the goroutine closing stale idle connections runs
	// gen counts the sweeper's ticks (a quarter of IdleTimeout each): a
	// connection notes it when it goes idle, so that no clock is read
	// per request.
	gen atomic.Int64
}

// New returns a pool; it dials nothing until the first request.
func New(cfg Config) *Pool {
	if cfg.MaxConns <= 0 {
		cfg.MaxConns = DefaultMaxConns
	}
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = DefaultIdleTimeout
	}
	return &Pool{cfg: cfg, idle: make(chan *conn, cfg.MaxConns), sem: make(chan struct{}, cfg.MaxConns), done: make(chan struct{})}
}

// conn is one upstream connection and its buffers.
type conn struct {
	nc     net.Conn
	br     *bufio.Reader
	bw     *bufio.Writer
	gen    int64 // Pool.gen when it went idle
	reused bool  // it carried an exchange before
}

var (
	readerPool = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, maxHeadSize) }}
	writerPool = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, 4<<10) }}
)

// get takes an idle connection or dials one, waiting up to MaxConnWait
// while MaxConns are open.
func (p *Pool) get() (*conn, error) {
	select {
	case c := <-p.idle:
		return c, nil
	default:
	}
	select {
	case p.sem <- struct{}{}:
		return p.dial()
	default:
	}
	t := time.NewTimer(p.cfg.MaxConnWait)
	defer t.Stop()
	for {
		select {
		case c := <-p.idle:
			return c, nil
		case p.sem <- struct{}{}:
			return p.dial()
		case <-t.C:
			return nil, ErrNoFreeConns
		}
	}
}

func (p *Pool) dial() (*conn, error) {
	nc, err := p.cfg.Dial()
	if err != nil {
		<-p.sem
		return nil, err
	}
	br := readerPool.Get().(*bufio.Reader)
	br.Reset(nc)
	bw := writerPool.Get().(*bufio.Writer)
	bw.Reset(nc)
	return &conn{nc: nc, br: br, bw: bw}, nil
}

// put returns c to the idle connections, and starts the sweeper if it
// is not running.
func (p *Pool) put(c *conn) {
	if p.closed.Load() {
		p.close(c)
		return
	}
	c.reused = true
	c.gen = p.gen.Load()
	p.idle <- c // never blocks: at most MaxConns exist
	if !p.sweeper.Load() && p.sweeper.CompareAndSwap(false, true) {
		go p.sweep()
	}
}

// sweep closes the connections idle for IdleTimeout (up to a quarter of
// it more), ticking every quarter, until none is open.
func (p *Pool) sweep() {
	t := time.NewTicker(max(p.cfg.IdleTimeout/4, time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-p.done:
			p.CloseIdle()
			p.sweeper.Store(false)
			return
		case <-t.C:
		}
		gen := p.gen.Add(1)
		for range len(p.idle) {
			select {
			case c := <-p.idle:
				if gen-c.gen > 4 || p.closed.Load() {
					p.close(c)
				} else {
					p.idle <- c
				}
			default:
			}
		}
		if len(p.sem) == 0 {
			p.sweeper.Store(false)
			return
		}
	}
}

// close closes c and frees its place.
func (p *Pool) close(c *conn) {
	_ = c.nc.Close()
	c.br.Reset(nil)
	readerPool.Put(c.br)
	c.bw.Reset(nil)
	writerPool.Put(c.bw)
	c.br, c.bw = nil, nil
	<-p.sem
}

// Close closes the idle connections now and the busy ones when their
// exchange ends. The pool still serves requests (on connections it then
// closes): a request in flight when its service was replaced ends well.
func (p *Pool) Close() {
	p.closed.Store(true)
	p.once.Do(func() { close(p.done) })
	p.CloseIdle()
}

// CloseIdle closes the connections idle now; busy ones are kept.
func (p *Pool) CloseIdle() {
	for {
		select {
		case c := <-p.idle:
			p.close(c)
		default:
			return
		}
	}
}

// Request is what Do sends.
type Request struct {
	// Head is the request line and the header lines, each ending in CRLF,
	// without framing headers (Content-Length, Transfer-Encoding) and
	// without the empty line: Do adds those.
	Head []byte
	// IsHead: the request is a HEAD (its answer has no body).
	IsHead bool
	// Idempotent: the request may be sent again, on another connection,
	// after a failed attempt other than a timeout (never with BodyStream).
	Idempotent bool
	// SendLength writes "Content-Length: 0" for an empty Body (a method
	// whose requests carry a body).
	SendLength bool
	// Body is sent with its Content-Length, unless BodyStream is set.
	Body []byte
	// BodyStream is read to its end and sent with BodyLen as its
	// Content-Length, or chunked if BodyLen < 0, flushed after each read.
	BodyStream io.Reader
	BodyLen    int64
}

// Response is an upstream's answer. Head.Lines and Head.Reason are valid
// until the first Read; the body is read with Read, and Release must be
// called once, after the last Read or instead of it.
type Response struct {
	Head
	p    *Pool
	c    *conn
	left int64 // body bytes left: in the current chunk if chunked
	eof  bool
	err  error
}

// Do sends req and reads the answer's header block into resp, skipping
// informational (1xx) answers. On error nothing is left to release.
func (p *Pool) Do(req *Request, resp *Response) error {
	for attempt := 1; ; attempt++ {
		err := p.do(req, resp)
		if err == nil {
			return nil
		}
		if !req.Idempotent || req.BodyStream != nil || attempt >= maxAttempts || errors.Is(err, ErrNoFreeConns) || isTimeout(err) || errors.Is(err, errDial) {
			return err
		}
	}
}

var errDial = errors.New("relay: dial")

type dialError struct{ err error }

func (e *dialError) Error() string { return e.err.Error() }
func (e *dialError) Unwrap() []error {
	return []error{e.err, errDial}
}

func isTimeout(err error) bool {
	var te interface{ Timeout() bool }
	return errors.As(err, &te) && te.Timeout()
}

func (p *Pool) do(req *Request, resp *Response) error {
	c, err := p.get()
	if err != nil {
		if errors.Is(err, ErrNoFreeConns) {
			return err
		}
		return &dialError{err}
	}
	_ = c.nc.SetWriteDeadline(time.Time{}) // a new exchange (see the package comment)
	if err := writeRequest(c.bw, req); err != nil {
		p.close(c)
		return fmt.Errorf("relay: write request: %w", err)
	}
	for n := 0; ; n++ {
		h, err := readHead(c.br, req.IsHead)
		if err != nil {
			p.close(c)
			if errors.Is(err, io.EOF) && c.reused {
				return ErrConnectionClosed
			}
			return fmt.Errorf("relay: read answer: %w", err)
		}
		if h.Status >= 200 {
			*resp = Response{Head: h, p: p, c: c, left: h.BodyLen}
			if h.BodyLen == Chunked {
				resp.left = 0
			}
			resp.eof = h.BodyLen == 0
			return nil
		}
		if h.Status == 101 || n >= maxInterim {
			// An upgrade nobody asked for (Upgrade is never forwarded).
			p.close(c)
			return ErrMalformed
		}
	}
}

// readHead reads and consumes one header block.
func readHead(br *bufio.Reader, isHead bool) (Head, error) {
	want := 1
	for {
		b, err := br.Peek(want)
		if len(b) < want {
			if err == nil || errors.Is(err, bufio.ErrBufferFull) {
				err = ErrMalformed // a header block over maxHeadSize
			}
			if errors.Is(err, io.EOF) && len(b) > 0 {
				err = io.ErrUnexpectedEOF
			}
			return Head{}, err
		}
		b, _ = br.Peek(br.Buffered())
		h, n, err := ParseHead(b, isHead)
		if err == nil {
			_, _ = br.Discard(n) // Lines stay in the buffer until the next read
			return h, nil
		}
		if !errors.Is(err, errNeedMore) {
			return Head{}, err
		}
		want = len(b) + 1
		if want > maxHeadSize {
			return Head{}, ErrMalformed
		}
	}
}

var (
	crlf        = []byte("\r\n")
	hdrLength   = []byte("Content-Length: ")
	hdrChunked  = []byte("Transfer-Encoding: chunked\r\n\r\n")
	lastChunk   = []byte("0\r\n\r\n")
	copyBufPool = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}
)

func writeRequest(bw *bufio.Writer, req *Request) error {
	_, _ = bw.Write(req.Head)
	var num [24]byte
	switch {
	case req.BodyStream != nil && req.BodyLen < 0:
		_, _ = bw.Write(hdrChunked)
		return writeChunked(bw, req.BodyStream)
	case req.BodyStream != nil:
		_, _ = bw.Write(hdrLength)
		_, _ = bw.Write(strconv.AppendInt(num[:0], req.BodyLen, 10))
		_, _ = bw.Write(crlf)
		_, _ = bw.Write(crlf)
		return writeFixed(bw, req.BodyStream, req.BodyLen)
	case len(req.Body) > 0 || req.SendLength:
		_, _ = bw.Write(hdrLength)
		_, _ = bw.Write(strconv.AppendInt(num[:0], int64(len(req.Body)), 10))
		_, _ = bw.Write(crlf)
		_, _ = bw.Write(crlf)
		_, _ = bw.Write(req.Body)
	default:
		_, _ = bw.Write(crlf)
	}
	return bw.Flush()
}

// writeFixed sends exactly n bytes of r, flushed after each read.
func writeFixed(bw *bufio.Writer, r io.Reader, n int64) error {
	bp := copyBufPool.Get().(*[]byte)
	defer copyBufPool.Put(bp)
	for n > 0 {
		buf := *bp
		if int64(len(buf)) > n {
			buf = buf[:n]
		}
		m, err := r.Read(buf)
		if m > 0 {
			n -= int64(m)
			if _, werr := bw.Write(buf[:m]); werr != nil {
				return werr
			}
			if werr := bw.Flush(); werr != nil {
				return werr
			}
		}
		if err != nil {
			if errors.Is(err, io.EOF) && n == 0 {
				break
			}
			if errors.Is(err, io.EOF) {
				return io.ErrUnexpectedEOF
			}
			return err
		}
	}
	return bw.Flush()
}

// writeChunked sends r chunked, one chunk per read, flushed.
func writeChunked(bw *bufio.Writer, r io.Reader) error {
	bp := copyBufPool.Get().(*[]byte)
	defer copyBufPool.Put(bp)
	var num [20]byte
	for {
		m, err := r.Read(*bp)
		if m > 0 {
			_, _ = bw.Write(strconv.AppendUint(num[:0], uint64(m), 16))
			_, _ = bw.Write(crlf)
			_, _ = bw.Write((*bp)[:m])
			_, _ = bw.Write(crlf)
			if werr := bw.Flush(); werr != nil {
				return werr
			}
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
	}
	_, _ = bw.Write(lastChunk)
	return bw.Flush()
}

// Buffered returns the body bytes already read from the upstream, if the
// whole body of a Content-Length answer is among them (nil otherwise):
// the caller may copy them and call Skip instead of Read.
func (r *Response) Buffered() []byte {
	if r.eof || r.BodyLen < 0 || r.left != r.BodyLen || int64(r.c.br.Buffered()) < r.left {
		return nil
	}
	b, _ := r.c.br.Peek(int(r.left))
	return b
}

// Skip consumes the body Buffered returned.
func (r *Response) Skip() {
	_, _ = r.c.br.Discard(int(r.left))
	r.left = 0
	r.eof = true
}

// Read reads the body, decoded from its framing; io.EOF at its end. A
// body cut short is an error (io.ErrUnexpectedEOF, or the read's).
func (r *Response) Read(p []byte) (int, error) {
	if r.err != nil {
		return 0, r.err
	}
	if r.eof {
		return 0, io.EOF
	}
	var n int
	var err error
	switch r.BodyLen {
	case UntilClose:
		n, err = r.c.br.Read(p)
		if errors.Is(err, io.EOF) {
			r.eof = true
			return n, io.EOF
		}
	case Chunked:
		n, err = r.readChunked(p)
	default:
		if int64(len(p)) > r.left {
			p = p[:r.left]
		}
		n, err = r.c.br.Read(p)
		r.left -= int64(n)
		if r.left == 0 {
			r.eof = true
			err = nil
		} else if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
	}
	if err != nil {
		r.err = err
		return n, err
	}
	if r.eof && n == 0 {
		return 0, io.EOF
	}
	return n, nil
}

// readChunked reads from the current chunk, starting the next when it
// is done; after the last chunk it reads the trailer (dropped).
func (r *Response) readChunked(p []byte) (int, error) {
	br := r.c.br
	if r.left == 0 {
		size, err := readChunkSize(br)
		if err != nil {
			return 0, err
		}
		if size == 0 {
			if err := skipTrailer(br); err != nil {
				return 0, err
			}
			r.eof = true
			return 0, nil
		}
		r.left = size
	}
	if int64(len(p)) > r.left {
		p = p[:r.left]
	}
	n, err := br.Read(p)
	r.left -= int64(n)
	if err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return n, err
	}
	if r.left == 0 {
		if err := readCRLF(br); err != nil {
			return n, err
		}
	}
	return n, nil
}

func readChunkSize(br *bufio.Reader) (int64, error) {
	line, err := br.ReadSlice('\n')
	if err != nil {
		if errors.Is(err, io.EOF) {
			return 0, io.ErrUnexpectedEOF
		}
		return 0, fmt.Errorf("%w: chunk size line: %v", ErrMalformed, err)
	}
	line = trimCR(line[:len(line)-1])
	if i := bytes.IndexByte(line, ';'); i >= 0 { // chunk extensions: ignored
		line = line[:i]
	}
	line = TrimOWS(line)
	if len(line) == 0 || len(line) > 15 {
		return 0, ErrMalformed
	}
	var size int64
	for _, c := range line {
		var d byte
		switch {
		case '0' <= c && c <= '9':
			d = c - '0'
		case 'a' <= c && c <= 'f':
			d = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			d = c - 'A' + 10
		default:
			return 0, ErrMalformed
		}
		size = size<<4 | int64(d)
	}
	return size, nil
}

func readCRLF(br *bufio.Reader) error {
	c, err := br.ReadByte()
	if err == nil && c == '\r' {
		c, err = br.ReadByte()
	}
	if err != nil {
		if errors.Is(err, io.EOF) {
			return io.ErrUnexpectedEOF
		}
		return err
	}
	if c != '\n' {
		return ErrMalformed
	}
	return nil
}

// skipTrailer reads the trailer section up to its empty line.
func skipTrailer(br *bufio.Reader) error {
	for range maxInterim {
		line, err := br.ReadSlice('\n')
		if err != nil {
			if errors.Is(err, io.EOF) {
				return io.ErrUnexpectedEOF
			}
			return ErrMalformed
		}
		if len(trimCR(line[:len(line)-1])) == 0 {
			return nil
		}
	}
	return ErrMalformed
}

// Release ends the exchange: the connection goes back to the pool if the
// body was read to its end and the upstream keeps it open, else it is
// closed.
func (r *Response) Release() {
	if r.c == nil {
		return
	}
	if r.eof && r.err == nil && !r.Close {
		r.p.put(r.c)
	} else {
		r.p.close(r.c)
	}
	*r = Response{}
}
