package workspace

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"

	"gatehouse/actors/gateway"
)

// fakeAgents has one agent, owned by alice and shared with bob.
type fakeAgents struct {
	a   gateway.Agent
	dir string
}

func (f *fakeAgents) GetAgent(_ context.Context, user, ref string) (gateway.Agent, error) {
	if ref != f.a.AgentKey || (user != "" && !f.a.CanUse(user)) {
		return gateway.Agent{}, gateway.ErrNotFound
	}
	return f.a, nil
}

func (f *fakeAgents) WorkspaceOf(uuid.UUID) string { return f.dir }

func TestWorkspace(t *testing.T) {
	f := &fakeAgents{a: gateway.Agent{ID: uuid.New(), AgentKey: "w", OwnerID: "alice", SharedWith: []string{"bob"}}, dir: t.TempDir()}
	if err := os.MkdirAll(filepath.Join(f.dir, "out"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(f.dir, "out", "r.csv"), []byte("a,b\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ws, ctx := New(f), context.Background()
	alice, bob, mallory := gateway.Principal{User: "alice"}, gateway.Principal{User: "bob"}, gateway.Principal{User: "mallory"}

	if l, err := ws.List(ctx, bob, "w", "out/", 10); err != nil || l.Total != 1 || l.Data[0].Path != "w/out/r.csv" {
		t.Errorf("List(bob) = %+v, %v; want w/out/r.csv", l, err)
	}
	if _, err := ws.List(ctx, mallory, "w", "", 10); !errors.Is(err, ErrAgentNotFound) {
		t.Errorf("List(mallory) = %v, want ErrAgentNotFound", err)
	}
	file, err := ws.Open(ctx, bob, "w/out/r.csv")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(file)
	file.Close()
	if string(b) != "a,b\n" || file.ContentType != "text/csv; charset=utf-8" {
		t.Errorf("Open = %q %q", b, file.ContentType)
	}
	for _, p := range []string{"w/../x", "w", "w/", "/w/out/../../etc"} {
		if _, err := ws.Open(ctx, alice, p); !errors.Is(err, ErrBadPath) {
			t.Errorf("Open(%q) = %v, want ErrBadPath", p, err)
		}
	}
	if _, err := ws.Open(ctx, alice, "w/out/none"); !errors.Is(err, gateway.ErrNotFound) {
		t.Errorf("Open(missing) = %v, want ErrNotFound", err)
	}
	if err := ws.Remove(ctx, bob, "w/out/r.csv"); !errors.Is(err, gateway.ErrForbidden) {
		t.Errorf("Remove(bob) = %v, want ErrForbidden", err)
	}
	if err := ws.Remove(ctx, alice, "w/out"); !errors.Is(err, gateway.ErrInUse) {
		t.Errorf("Remove(a directory with a file) = %v, want ErrInUse", err)
	}
	if err := ws.Remove(ctx, alice, "w/out/r.csv"); err != nil {
		t.Errorf("Remove(alice) = %v", err)
	}
}

// TestOpenRefusesFIFO: a FIFO (a tool can make one) is refused at once,
// without being opened: open(2) on it would block until a writer came,
// pinning an OS thread per request.
func TestOpenRefusesFIFO(t *testing.T) {
	f := &fakeAgents{a: gateway.Agent{ID: uuid.New(), AgentKey: "w", OwnerID: "alice"}, dir: t.TempDir()}
	fifo := filepath.Join(f.dir, "pipe")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	if err := os.Symlink("pipe", filepath.Join(f.dir, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(f.dir, "swapped"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	// A regular file replaced by a FIFO between the Stat and the open.
	testHookBeforeOpen = func(rel string) {
		if rel == "swapped" {
			_ = os.Remove(filepath.Join(f.dir, rel))
			_ = os.Symlink("pipe", filepath.Join(f.dir, rel))
		}
	}
	t.Cleanup(func() { testHookBeforeOpen = nil })
	ws := New(f)
	for _, name := range []string{"w/pipe", "w/link", "w/swapped"} {
		done := make(chan error, 1)
		go func() {
			file, err := ws.Open(context.Background(), gateway.Principal{User: "alice"}, name)
			if err == nil {
				file.Close()
			}
			done <- err
		}()
		select {
		case err := <-done:
			if !errors.Is(err, gateway.ErrNotFound) {
				t.Errorf("Open(%s) = %v, want ErrNotFound", name, err)
			}
		case <-time.After(2 * time.Second):
			// Unblock the stuck open with a writer, so the goroutine ends.
			if w, err := os.OpenFile(fifo, os.O_WRONLY, 0); err == nil {
				w.Close()
			}
			<-done
			t.Fatalf("Open(%s) blocked on the FIFO", name)
		}
	}
}
