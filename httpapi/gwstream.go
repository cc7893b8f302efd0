package httpapi

import (
	"bufio"
	"context"
	"encoding/json"
	"strings"
	"time"

	"github.com/valyala/fasthttp"
)

// sseWriter writes Server-Sent Events and flushes each one; the first
// failed write cancels the run (the client went away).
type sseWriter struct {
	w      *bufio.Writer
	cancel context.CancelFunc
}

func (w *sseWriter) raw(s string) error {
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

// send writes one event (event may be empty) with v as JSON data.
func (w *sseWriter) send(event string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	var sb strings.Builder
	if event != "" {
		sb.WriteString("event: " + event + "\n")
	}
	sb.WriteString("data: ")
	sb.Write(b)
	sb.WriteString("\n\n")
	return w.raw(sb.String())
}

// stream answers 200 text/event-stream; body runs after the handler
// returns, on the connection's goroutine, with a context cancelled when a
// write fails.
func (s *GatewayServer) stream(r *gwReq, body func(ctx context.Context, sw *sseWriter)) {
	r.rc.SetStatusCode(fasthttp.StatusOK)
	r.rc.SetContentType("text/event-stream; charset=utf-8")
	r.rc.Response.Header.Set("Cache-Control", "no-cache")
	r.rc.Response.Header.Set("X-Accel-Buffering", "no")
	r.rc.SetBodyStreamWriter(func(w *bufio.Writer) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		body(ctx, &sseWriter{w: w, cancel: cancel})
	})
}

// heartbeat is how often an idle stream writes an SSE comment, so that a
// client that went away is noticed (a write fails) while the provider is
// still thinking, and the upstream call is cancelled.
const heartbeat = 500 * time.Millisecond

// pump runs the agent in its own goroutine while this one (the
// connection's) writes each delta through write, and a heartbeat comment
// when idle. The first failed write cancels ctx and with it the run.
func (s *GatewayServer) pump(ctx context.Context, sw *sseWriter, rn *run, write func(string) error) (llmResult, error) {
	type result struct {
		res llmResult
		err error
	}
	deltas := make(chan string, 64)
	done := make(chan result, 1)
	go func() {
		res, err := s.execute(ctx, rn, func(d string) error {
			select {
			case deltas <- d:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		})
		done <- result{res, err}
	}()
	tick := time.NewTicker(heartbeat)
	defer tick.Stop()
	failed := false
	for {
		select {
		case d := <-deltas:
			if !failed && write(d) != nil {
				failed = true // sw cancelled ctx: the run ends soon
			}
		case <-tick.C:
			if !failed && sw.raw(": ping\n\n") != nil {
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
