package mcppool

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"

	"gatehouse/actors/gateway/toolexec/toolexectest"
)

// TestWaitBoundedByContext: while one caller connects to a server that
// never answers (its 30 s connect timeout), another waits only as long as
// its own context allows, and Forget ends the hanging attempt's process.
func TestWaitBoundedByContext(t *testing.T) {
	p := New(toolexectest.None(t), nil)
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
