package gateway

import (
	"bufio"
	"context"
	"encoding/json"
	"sync"
	"time"

	"github.com/valyala/fasthttp"

	"gatehouse/actors/gateway/agentrun"
)

// Stream is how an operation's Events reach the client: Server-Sent
// Events today, WebSocket event frames next. Events run on one
// goroutine; a Stream is not safe for concurrent use.
type Stream interface {
	// Send writes one event and flushes it. event names it ("" for none);
	// data is JSON-encoded, except a Raw, which is sent as it is. An error
	// means the client is gone: the Events' context has ended then, and
	// the rest should be dropped.
	Send(event string, data any) error
	// Ping tells an idle client the stream is alive (an SSE comment); like
	// Send, it fails once the client is gone, which is how a vanished
	// client is noticed while nothing else is sent.
	Ping() error
	// Error maps err with the transport's error mapper, in the client's
	// language, logging it once if it is unexpected, for the Events to
	// send in the form their protocol wants.
	Error(err error) ErrorDetail
}

// Raw is event data sent as it is rather than as JSON: the "[DONE]" that
// ends a chat-completions stream.
type Raw string

// sseStream writes Server-Sent Events to the connection; the first failed
// write cancels the Events' context (the client went away).
type sseStream struct {
	s            *Server
	w            *bufio.Writer
	cancel       context.CancelFunc
	lang         int
	method, path string // copies, for the log
}

func (w *sseStream) write(s string) error {
	if _, err := w.w.WriteString(s); err != nil {
		w.cancel()
		return err
	}
	return w.flush()
}

func (w *sseStream) flush() error {
	if err := w.w.Flush(); err != nil {
		w.cancel()
		return err
	}
	return nil
}

func (w *sseStream) Send(event string, data any) error {
	if err := w.Queue(event, data); err != nil {
		return err
	}
	return w.flush()
}

// Queue writes one event into the stream's buffer without flushing it:
// the next Send (or Ping) sends both in one write. For events that
// another follows at once (the ones that end a stream).
func (w *sseStream) Queue(event string, data any) error {
	var b []byte
	if _, ok := data.(Raw); !ok {
		// Encoded before anything is written, so that a value that does
		// not encode leaves the stream as it was.
		var err error
		if b, err = json.Marshal(data); err != nil {
			return err
		}
	}
	bw := w.w
	if event != "" {
		bw.WriteString("event: ")
		bw.WriteString(event)
		bw.WriteByte('\n')
	}
	bw.WriteString("data: ")
	if raw, ok := data.(Raw); ok {
		bw.WriteString(string(raw))
	} else {
		bw.Write(b)
	}
	if _, err := bw.WriteString("\n\n"); err != nil { // a bufio.Writer's error sticks
		w.cancel()
		return err
	}
	return nil
}

// Flush sends what Queue held back.
func (w *sseStream) Flush() error { return w.flush() }

// queuer is a Stream that can hold an event back until its next Send
// (or Flush).
type queuer interface {
	Queue(event string, data any) error
	Flush() error
}

// queue sends an event that another follows at once: held back with the
// next one when st can (one write for both), sent at once otherwise.
func queue(st Stream, event string, data any) error {
	if q, ok := st.(queuer); ok {
		return q.Queue(event, data)
	}
	return st.Send(event, data)
}

func (w *sseStream) Ping() error { return w.write(": ping\n\n") }

// Error is the SSE mapper.
func (w *sseStream) Error(err error) ErrorDetail {
	_, d := w.s.mapError(err, w.lang, w.method, w.path)
	return d
}

// serveSSE answers 200 text/event-stream; ev runs after the handler
// returns, on the connection's goroutine, with a context cancelled when a
// write fails. Nothing of rc is kept but copies.
func (s *Server) serveSSE(rc *fasthttp.RequestCtx, lang int, ev Events) {
	rc.SetStatusCode(fasthttp.StatusOK)
	rc.SetContentType("text/event-stream; charset=utf-8")
	rc.Response.Header.Set("Cache-Control", "no-cache")
	rc.Response.Header.Set("X-Accel-Buffering", "no")
	method, path := string(rc.Method()), string(rc.Path())
	rc.SetBodyStreamWriter(func(w *bufio.Writer) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		ev(ctx, &sseStream{s: s, w: w, cancel: cancel, lang: lang, method: method, path: path})
	})
}

// heartbeat is how often an idle stream pings, so that a client that went
// away is noticed (a write fails) while the provider is still thinking,
// and the upstream call is cancelled.
const heartbeat = 500 * time.Millisecond

// holdFirst is how long pump lets an event queued before it (the chat
// stream's role chunk) wait for the first delta, which then goes out in
// the same write; with no delta by then, it is flushed alone.
const holdFirst = 20 * time.Millisecond

// pump runs turn t on this goroutine (the stream's), writing each delta
// through write as it comes, while a timer pings the client every
// heartbeat (a write and a ping never overlap) and, holdFirst in,
// flushes what was queued before pump if no delta did. The first failed
// write ends ctx (Stream's contract) and with it the run. No goroutine
// and no channel stand between the provider's answer and the client:
// the run's own goroutine writes (issue 35).
func (s *Server) pump(ctx context.Context, st Stream, t *agentrun.Turn, write func(string) error) (agentrun.Result, error) {
	var (
		mu      sync.Mutex
		failed  bool // a write or ping failed: the stream ended ctx
		stopped bool // pump returned: no more pings
		beat    *time.Timer
	)
	q, held := st.(queuer)
	first := heartbeat
	if held {
		first = holdFirst
	}
	mu.Lock()
	beat = time.AfterFunc(first, func() {
		mu.Lock()
		defer mu.Unlock()
		if stopped || failed {
			return
		}
		if held { // the first beat: what was queued goes out
			held = false
			if q.Flush() != nil {
				failed = true
				return
			}
			beat.Reset(heartbeat - holdFirst)
			return
		}
		if st.Ping() != nil {
			failed = true
			return
		}
		beat.Reset(heartbeat)
	})
	mu.Unlock()
	defer func() {
		mu.Lock()
		stopped = true
		beat.Stop()
		mu.Unlock()
	}()
	res, err := s.d.Runner.RunTurn(ctx, t, func(d string) error {
		mu.Lock()
		defer mu.Unlock()
		if !failed && write(d) != nil {
			failed = true // the stream ended ctx: the run ends now
		}
		if failed {
			if err := ctx.Err(); err != nil {
				return err
			}
			return context.Canceled
		}
		return nil
	})
	return res.Result, err
}
