package workspace

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

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
