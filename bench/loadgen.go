package bench

import (
	"context"
	"errors"
	"fmt"
	"net"
	"runtime"
	"sync"
	"syscall"
	"time"
)

// Load describes one run of the load generator: Conns keep-alive
// connections, each sending a request and waiting for its answer before
// the next (a closed loop), for Warmup and then Duration, of which only
// Duration is measured.
//
// The generator is built like wrk, to take as little of the shared CPU as
// it can: Threads OS threads, each with its own epoll set of non-blocking
// sockets, parsing answers in place; no goroutine per connection, no
// allocation per request.
type Load struct {
	// Addr is the host:port to load; loopback only.
	Addr string
	// Requests are raw HTTP/1.1 requests. Connection i starts at request
	// i*len(Requests)/Conns and walks through all of them in turn, so the
	// requests (and the keys they carry) are spread evenly.
	Requests [][]byte
	Conns    int
	// Threads is the number of event loops; 0 means 2.
	Threads  int
	Warmup   time.Duration
	Duration time.Duration
	// Status is the expected status; any other counts as an error.
	Status int
	// OnWindow, if set, is called when the measured window opens
	// (start true) and when it closes, to sample CPU counters.
	OnWindow func(start bool)
}

// Result is what a Load measured.
type Result struct {
	// Requests counts the answers with the expected status completed in
	// the measured window; Errors the others, and broken connections.
	Requests, Errors int64
	Elapsed          time.Duration
	Latency          Histogram
	// FirstErr is the first error met, for the report.
	FirstErr error
}

// Throughput returns the measured requests per second.
func (r *Result) Throughput() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Requests) / r.Elapsed.Seconds()
}

func (r *Result) fail(measured bool, err error) {
	if measured {
		r.Errors++
	}
	if r.FirstErr == nil {
		r.FirstErr = err
	}
}

// Run runs l. It returns an error if a connection could not be opened or
// nothing succeeded; other failures are counted in Errors.
func Run(ctx context.Context, l Load) (*Result, error) {
	if l.Conns < 1 || len(l.Requests) == 0 || l.Duration <= 0 {
		return nil, errors.New("bench: Load needs Conns, Requests and Duration")
	}
	threads := l.Threads
	if threads <= 0 {
		threads = 2
	}
	threads = min(threads, l.Conns)
	loops := make([]*eventLoop, threads)
	defer func() {
		for _, lp := range loops {
			if lp != nil {
				lp.close()
			}
		}
	}()
	for t := range loops {
		lp, err := newEventLoop(&l)
		if err != nil {
			return nil, err
		}
		loops[t] = lp
	}
	for i := range l.Conns {
		if _, err := loops[i%threads].dial(i * len(l.Requests) / l.Conns); err != nil {
			return nil, err
		}
	}
	start := time.Now()
	from, end := start.Add(l.Warmup), start.Add(l.Warmup+l.Duration)
	ctx, cancel := context.WithDeadline(ctx, end)
	defer cancel()
	if l.OnWindow != nil {
		sampled := make(chan struct{})
		defer func() { <-sampled }()
		go func() {
			defer close(sampled)
			time.Sleep(time.Until(from))
			l.OnWindow(true)
			<-ctx.Done()
			l.OnWindow(false)
		}()
	}
	var wg sync.WaitGroup
	for _, lp := range loops {
		wg.Add(1)
		go func() {
			defer wg.Done()
			lp.run(ctx, from, end)
		}()
	}
	wg.Wait()

	total := &Result{Elapsed: l.Duration}
	for _, lp := range loops {
		r := &lp.res
		total.Requests += r.Requests
		total.Errors += r.Errors
		total.Latency.Merge(&r.Latency)
		if total.FirstErr == nil {
			total.FirstErr = r.FirstErr
		}
	}
	if total.Requests == 0 {
		return total, fmt.Errorf("bench: no successful request to %s: %v", l.Addr, total.FirstErr)
	}
	return total, nil
}

// eventLoop drives its connections from one locked OS thread.
type eventLoop struct {
	load  *Load
	epfd  int
	conns map[int]*loadConn // by fd
	res   Result
}

// loadConn is one connection's closed loop.
type loadConn struct {
	fd      int
	next    int       // index of the next request
	sent    time.Time // when the outstanding request was written
	pending []byte    // rest of a request the socket did not take
	buf     []byte
	n       int // bytes in buf
}

func newEventLoop(l *Load) (*eventLoop, error) {
	epfd, err := syscall.EpollCreate1(syscall.EPOLL_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("epoll: %w", err)
	}
	return &eventLoop{load: l, epfd: epfd, conns: map[int]*loadConn{}}, nil
}

// dial opens a connection that starts at request next.
func (lp *eventLoop) dial(next int) (*loadConn, error) {
	c, err := net.Dial("tcp", lp.load.Addr)
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", lp.load.Addr, err)
	}
	f, err := c.(*net.TCPConn).File() // a dup, in blocking mode
	c.Close()
	if err != nil {
		return nil, err
	}
	fd, err := syscall.Dup(int(f.Fd()))
	f.Close()
	if err != nil {
		return nil, err
	}
	if err := syscall.SetNonblock(fd, true); err != nil {
		syscall.Close(fd)
		return nil, err
	}
	ev := syscall.EpollEvent{Events: syscall.EPOLLIN, Fd: int32(fd)}
	if err := syscall.EpollCtl(lp.epfd, syscall.EPOLL_CTL_ADD, fd, &ev); err != nil {
		syscall.Close(fd)
		return nil, fmt.Errorf("epoll add: %w", err)
	}
	lc := &loadConn{fd: fd, next: next, buf: make([]byte, 64<<10)}
	lp.conns[fd] = lc
	return lc, nil
}

func (lp *eventLoop) close() {
	for fd := range lp.conns {
		syscall.Close(fd)
	}
	syscall.Close(lp.epfd)
}

func (lp *eventLoop) run(ctx context.Context, from, end time.Time) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	for _, c := range lp.conns {
		lp.send(c)
	}
	events := make([]syscall.EpollEvent, 256)
	for ctx.Err() == nil {
		wait := min(time.Until(end), 50*time.Millisecond)
		if wait <= 0 {
			return
		}
		n, err := syscall.EpollWait(lp.epfd, events, int(wait/time.Millisecond)+1)
		if err != nil && !errors.Is(err, syscall.EINTR) {
			lp.res.fail(false, err)
			return
		}
		for _, ev := range events[:max(n, 0)] {
			c := lp.conns[int(ev.Fd)]
			if c == nil {
				continue
			}
			if ev.Events&syscall.EPOLLOUT != 0 {
				lp.flush(c)
			}
			if ev.Events&(syscall.EPOLLIN|syscall.EPOLLERR|syscall.EPOLLHUP) != 0 {
				lp.readable(c, from, end)
			}
		}
	}
}

// send writes c's next request.
func (lp *eventLoop) send(c *loadConn) {
	req := lp.load.Requests[c.next]
	c.next = (c.next + 1) % len(lp.load.Requests)
	c.sent = time.Now()
	c.pending = req
	lp.flush(c)
}

// flush writes what is pending, asking for EPOLLOUT if the socket is full.
func (lp *eventLoop) flush(c *loadConn) {
	for len(c.pending) > 0 {
		n, err := syscall.Write(c.fd, c.pending)
		switch {
		case errors.Is(err, syscall.EAGAIN):
			ev := syscall.EpollEvent{Events: syscall.EPOLLIN | syscall.EPOLLOUT, Fd: int32(c.fd)}
			_ = syscall.EpollCtl(lp.epfd, syscall.EPOLL_CTL_MOD, c.fd, &ev)
			return
		case err != nil:
			lp.broken(c, false, err)
			return
		}
		c.pending = c.pending[n:]
	}
	ev := syscall.EpollEvent{Events: syscall.EPOLLIN, Fd: int32(c.fd)}
	_ = syscall.EpollCtl(lp.epfd, syscall.EPOLL_CTL_MOD, c.fd, &ev)
}

// readable reads what arrived on c and, once the answer is whole, records
// it and sends the next request.
func (lp *eventLoop) readable(c *loadConn, from, end time.Time) {
	for {
		if c.n == len(c.buf) {
			c.buf = append(c.buf, make([]byte, len(c.buf))...)
		}
		n, err := syscall.Read(c.fd, c.buf[c.n:])
		if errors.Is(err, syscall.EAGAIN) {
			break
		}
		if err != nil || n == 0 {
			lp.broken(c, true, fmt.Errorf("read: %v (eof %v)", err, n == 0))
			return
		}
		c.n += n
	}
	m, status, closing, err := parseResponse(c.buf[:c.n])
	if err != nil {
		lp.broken(c, true, err)
		return
	}
	if m == 0 {
		return
	}
	now := time.Now()
	measured := !now.Before(from) && !now.After(end)
	if status != lp.load.Status {
		lp.res.fail(measured, fmt.Errorf("status %d: %q", status, c.buf[:min(m, 300)]))
	} else if measured {
		lp.res.Requests++
		lp.res.Latency.Record(now.Sub(c.sent))
	}
	c.n = copy(c.buf, c.buf[m:c.n])
	if closing {
		lp.broken(c, false, nil)
		return
	}
	lp.send(c)
}

// broken replaces a failed or closing connection with a new one.
func (lp *eventLoop) broken(c *loadConn, measured bool, err error) {
	if err != nil {
		lp.res.fail(measured, err)
	}
	delete(lp.conns, c.fd)
	syscall.Close(c.fd)
	nc, err := lp.dial(c.next)
	if err != nil {
		lp.res.fail(false, err)
		return
	}
	lp.send(nc)
}
