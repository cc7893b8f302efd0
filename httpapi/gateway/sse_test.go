package gateway

import (
	"bufio"
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"gatehouse/actors/gateway/agentrun"
)

// writeLog keeps each write that reaches the connection.
type writeLog struct {
	mu     sync.Mutex
	writes []string
}

func (w *writeLog) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.writes = append(w.writes, string(p))
	return len(p), nil
}

func (w *writeLog) all() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.writes)
}

// deltaRunner streams its deltas, the first after wait, from the
// caller's goroutine as the runtime does.
type deltaRunner struct {
	fakeRunner
	wait   time.Duration
	deltas []string
}

func (r deltaRunner) RunTurn(ctx context.Context, _ *agentrun.Turn, onDelta func(string) error) (agentrun.TurnResult, error) {
	time.Sleep(r.wait)
	for _, d := range r.deltas {
		if err := onDelta(d); err != nil {
			return agentrun.TurnResult{}, err
		}
	}
	return agentrun.TurnResult{}, nil
}

// streamThrough runs pump as the chat stream does: an event queued
// before it, its deltas, two events queued after it and [DONE]; it
// returns the connection's writes.
func streamThrough(t *testing.T, r Runner) []string {
	t.Helper()
	s := &Server{d: Deps{Runner: r}}
	wl := &writeLog{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st := &sseStream{s: s, w: bufio.NewWriter(wl), cancel: cancel}
	if err := queue(st, "", "role"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.pump(ctx, st, &agentrun.Turn{}, func(d string) error { return st.Send("", d) }); err != nil {
		t.Fatal(err)
	}
	if queue(st, "", "finish") != nil || queue(st, "", "usage") != nil || st.Send("", chatDone) != nil {
		t.Fatal("end of stream not written")
	}
	return wl.all()
}

// TestStreamWrites: the event queued before the run leaves with the
// first delta, the events that end the stream leave together, and each
// delta is flushed as it comes (issue 35: one write a flush).
func TestStreamWrites(t *testing.T) {
	got := streamThrough(t, deltaRunner{deltas: []string{"a", "b"}})
	want := []string{
		"data: \"role\"\n\ndata: \"a\"\n\n",
		"data: \"b\"\n\n",
		"data: \"finish\"\n\ndata: \"usage\"\n\ndata: [DONE]\n\n",
	}
	if !slices.Equal(got, want) {
		t.Errorf("writes = %q, want %q", got, want)
	}
	// A provider slower than holdFirst: the queued event is not held
	// for it.
	got = streamThrough(t, deltaRunner{wait: holdFirst + 100*time.Millisecond, deltas: []string{"a"}})
	if len(got) != 3 || got[0] != "data: \"role\"\n\n" || got[1] != "data: \"a\"\n\n" {
		t.Errorf("writes with a slow provider = %q, want the role event alone first", got)
	}
}
