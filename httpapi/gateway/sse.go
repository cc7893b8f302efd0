package gateway

import (
	"bufio"
	"context"
	"encoding/json"
	"strings"
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
	if err := w.w.Flush(); err != nil {
		w.cancel()
		return err
	}
	return nil
}

func (w *sseStream) Send(event string, data any) error {
	var sb strings.Builder
	if event != "" {
		sb.WriteString("event: " + event + "\n")
	}
	sb.WriteString("data: ")
	if raw, ok := data.(Raw); ok {
		sb.WriteString(string(raw))
	} else {
		b, err := json.Marshal(data)
		if err != nil {
			return err
		}
		sb.Write(b)
	}
	sb.WriteString("\n\n")
	return w.write(sb.String())
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

// pump runs turn t in its own goroutine while this one (the stream's)
// writes each delta through write, and a ping when idle. The first
// failed write ends ctx (Stream's contract) and with it the run.
func (s *Server) pump(ctx context.Context, st Stream, t *agentrun.Turn, write func(string) error) (agentrun.Result, error) {
	type result struct {
		res agentrun.Result
		err error
	}
	deltas := make(chan string, 64)
	done := make(chan result, 1)
	go func() {
		res, err := s.d.Runner.RunTurn(ctx, t, func(d string) error {
			select {
			case deltas <- d:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		})
		done <- result{res.Result, err}
	}()
	tick := time.NewTicker(heartbeat)
	defer tick.Stop()
	failed := false
	for {
		select {
		case d := <-deltas:
			if !failed && write(d) != nil {
				failed = true // the stream ended ctx: the run ends soon
			}
		case <-tick.C:
			if !failed && st.Ping() != nil {
				failed = true
			}
		case r := <-done:
			for len(deltas) > 0 { // sent before done: still to write
				if d := <-deltas; !failed && write(d) != nil {
					failed = true
				}
			}
			return r.res, r.err
		}
	}
}
