package listener

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

// TestTimeouts: the listener's read and idle timeouts (timeouts.go) on a
// real TCP listener, against raw clients. Each case writes its steps and
// then reads until the server closes the connection: the time that takes
// must lie in [min, max).
func TestTimeouts(t *testing.T) {
	const read, idle = 400 * time.Millisecond, 1200 * time.Millisecond
	const slack = 700 * time.Millisecond // sweeps (read/8) and a loaded machine
	l, err := New(Options{Name: "timeouts", ReadTimeout: read, IdleTimeout: idle})
	if err != nil {
		t.Fatal(err)
	}
	r := NewRouter()
	r.GET("/", l.Wrap("/", func(rc *fasthttp.RequestCtx) { rc.SetBodyString("ok") }))
	r.GET("/slow", l.Wrap("/slow", func(rc *fasthttp.RequestCtx) {
		time.Sleep(3 * read) // reads nothing meanwhile: not cut
		rc.SetBodyString("slow")
	}))
	l.SetHandler(r.Handler)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- l.Serve(ln) }()
	t.Cleanup(func() { // after the parallel cases
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := l.Shutdown(ctx); err != nil {
			t.Error(err)
		}
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	const get = "GET / HTTP/1.1\r\nHost: x\r\n\r\n"
	tests := []struct {
		name     string
		send     []string // written in turn; each full request's answer is read before the next step
		min, max time.Duration
		answers  int // full answers expected before the close
	}{
		{name: "a new connection that sends nothing", min: read, max: read + slack},
		{name: "a request line and no more", send: []string{"GET / HTTP/1.1\r\n"}, min: read, max: read + slack},
		{name: "kept alive, idle", send: []string{get}, answers: 1, min: idle, max: idle + slack},
		{name: "kept alive, then a partial request", send: []string{get, "GET / HTTP/1.1\r\nHost"}, answers: 1, min: read, max: read + slack},
		{name: "a slow handler is not a slow read", send: []string{"GET /slow HTTP/1.1\r\nHost: x\r\n\r\n"}, answers: 1, min: 3*read + idle, max: 3*read + idle + slack},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, err := net.Dial("tcp", ln.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(tt.max + 5*time.Second)) // the test's own bound
			br := bufio.NewReader(c)
			answers := 0
			start := time.Now()
			for _, s := range tt.send {
				if _, err := io.WriteString(c, s); err != nil {
					t.Fatal(err)
				}
				if strings.HasSuffix(s, "\r\n\r\n") {
					resp, err := http.ReadResponse(br, nil)
					if err != nil {
						t.Fatalf("answer %d: %v", answers+1, err)
					}
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != 200 {
						t.Fatalf("answer %d: status %d", answers+1, resp.StatusCode)
					}
					answers++
				}
			}
			rest, err := io.ReadAll(br) // until the server closes
			took := time.Since(start)
			if err != nil {
				t.Fatalf("after %v: %v", took, err)
			}
			if answers != tt.answers {
				t.Errorf("%d answers, want %d", answers, tt.answers)
			}
			if bytesHasStatus200(rest) {
				t.Errorf("an answer after the last request: %q", rest)
			}
			if took < tt.min || took >= tt.max {
				t.Errorf("closed after %v, want [%v, %v)", took, tt.min, tt.max)
			}
		})
	}
}

func bytesHasStatus200(b []byte) bool { return strings.Contains(string(b), " 200 ") }

// TestOverdue: the sweeper's rule, phase by phase.
func TestOverdue(t *testing.T) {
	to := &timeouts{read: 4, idle: 10}
	at := func(p, since uint64) uint64 { return since<<phaseBits | p }
	tests := []struct {
		name  string
		phase uint64
		reads int32
		now   uint64
		want  bool
	}{
		{"new, within", at(phaseNew, 10), 1, 14, false},
		{"new, past", at(phaseNew, 10), 1, 15, true},
		{"active reading, within", at(phaseActive, 10), 1, 14, false},
		{"active reading, past", at(phaseActive, 10), 1, 15, true},
		{"active not reading (a handler running), past", at(phaseActive, 10), 0, 100, false},
		{"idle, within", at(phaseIdle, 10), 1, 20, false},
		{"idle, past", at(phaseIdle, 10), 0, 21, true},
		{"off", at(phaseOff, 0), 1, 1000, false},
	}
	for _, tt := range tests {
		if got := to.overdue(tt.phase, tt.reads, tt.now); got != tt.want {
			t.Errorf("%s: overdue = %v, want %v", tt.name, got, tt.want)
		}
	}
}
