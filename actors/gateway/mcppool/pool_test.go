package mcppool

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/uuid"

	"gatehouse/actors/gateway/toolexec/toolexectest"
)

// TestWaitBoundedByContext: while a connection attempt to a server that
// never answers runs (up to dialTimeout), every caller waits only as long
// as its own context allows (ErrStarting), and Close ends the hanging
// attempt's process.
func TestWaitBoundedByContext(t *testing.T) {
	p := New(Config{}, toolexectest.None(t), nil)
	defer p.Close()
	spec := Spec{ID: uuid.New(), Name: "silent", Transport: Stdio, Command: "sleep", Args: []string{"60"}, Workspace: t.TempDir()}

	first := make(chan error, 1)
	fctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	go func() { _, err := p.Tools(fctx, spec); first <- err }()
	time.Sleep(200 * time.Millisecond) // the first caller holds the lock, connecting

	tests := []struct {
		name string
		call func(ctx context.Context) error
	}{
		{"Tools", func(ctx context.Context) error { _, err := p.Tools(ctx, spec); return err }},
		{"Call", func(ctx context.Context) error { _, err := p.Call(ctx, spec, "x", []byte(`{}`)); return err }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
			defer cancel()
			start := time.Now()
			err := tt.call(ctx)
			if took := time.Since(start); took > time.Second { // the first caller holds on for 1.5 s
				t.Errorf("waited %s behind the connecting caller", took)
			}
			if !errors.Is(err, ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("err = %v, want ErrUnavailable and the deadline", err)
			}
		})
	}
	if err := <-first; !errors.Is(err, ErrUnavailable) {
		t.Errorf("first caller: %v, want ErrUnavailable (the server never answered)", err)
	}
}

// TestSlowFirstStart: a server that takes a while to start (npx
// downloading it) is connected in the background: a caller whose context
// ends first gets ErrStarting (an ErrUnavailable), Starting and Status
// say so, and a later caller finds it up, its status connected.
func TestSlowFirstStart(t *testing.T) {
	self, err := filepath.Abs(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	p := New(Config{}, toolexectest.None(t), nil)
	defer p.Close()
	spec := Spec{ID: uuid.New(), Name: "slow", Transport: Stdio, Command: self, Args: []string{"-test.run=^$"},
		Env: map[string]string{serverEnv: "1", "MCPPOOL_TEST_DELAY_MS": "1500"}, Workspace: t.TempDir(), Cache: t.TempDir()}
	short, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if _, err := p.Tools(short, spec); !errors.Is(err, ErrStarting) || !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Tools during the start = %v, want ErrStarting", err)
	}
	if !p.Starting(spec.ID) {
		t.Error("Starting = false during the start")
	}
	if s := p.Peek(spec.ID); s.Connected || !s.Starting {
		t.Errorf("Peek during the start = %+v", s)
	}
	if s := p.Peek(uuid.New()); s.Connected || s.Starting || s.Error != "" {
		t.Errorf("Peek of a server never used = %+v", s)
	}
	st, cancel2 := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel2()
	if s := p.Status(st, spec); s.Connected || !s.Starting {
		t.Errorf("Status during the start = %+v, want starting", s)
	}
	long, cancel3 := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel3()
	tools, err := p.Tools(long, spec)
	if err != nil || len(tools) != 3 {
		t.Fatalf("Tools once started = %v, %v; want the 3 tools", tools, err)
	}
	if s := p.Status(long, spec); !s.Connected || s.Starting || p.Starting(spec.ID) {
		t.Errorf("Status once started = %+v", s)
	}
	if s := p.Peek(spec.ID); !s.Connected || len(s.Tools) != 3 {
		t.Errorf("Peek once started = %+v", s)
	}
}
