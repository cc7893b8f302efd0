package gateway

import (
	"fmt"
	"testing"
	"time"
)

// TestViewIsImmutable: a published view of the registry part keeps what
// it held while the registry goes on writing (copy on write), and the
// next view shows the writes.
func TestViewIsImmutable(t *testing.T) {
	n := newNode(t, DefaultConfig(), nil)
	gw := start(n)
	if _, err := gw.CreateProvider(ctx(t), ProviderInput{Name: "echo", ProviderType: ProviderEcho, Enabled: true}); err != nil {
		t.Fatal(err)
	}
	a, err := gw.CreateAgent(ctx(t), "alice", AgentInput{AgentKey: ptr("helper"), Provider: ptr("echo"), Model: ptr("m")})
	if err != nil {
		t.Fatal(err)
	}
	before := gw.view.Load()
	if _, ok := before.agents.get("helper"); !ok {
		t.Fatal("view after CreateAgent lacks the agent: a call's answer came before its view")
	}
	if err := gw.DeleteAgent(ctx(t), "alice", a.ID.String()); err != nil {
		t.Fatal(err)
	}
	if _, err := gw.CreateAgent(ctx(t), "bob", AgentInput{AgentKey: ptr("other"), Provider: ptr("echo"), Model: ptr("m")}); err != nil {
		t.Fatal(err)
	}
	if _, ok := before.agents.get("helper"); !ok {
		t.Error("an older view lost an agent deleted after it was published")
	}
	if _, ok := before.agents.get("other"); ok {
		t.Error("an older view shows an agent created after it was published")
	}
	if got := before.agentsOn[mustProviderID(t, gw)]; got != 1 {
		t.Errorf("older view agentsOn = %d, want 1", got)
	}
	after := gw.view.Load()
	if _, ok := after.agents.get("helper"); ok {
		t.Error("the current view still shows the deleted agent")
	}
	if _, ok := after.agents.get("other"); !ok {
		t.Error("the current view lacks the new agent")
	}
	if len(before.activity.ids) >= len(after.activity.ids) && len(after.activity.ids) > 0 {
		t.Errorf("activity: older view has %d entries, current %d", len(before.activity.ids), len(after.activity.ids))
	}
}

func mustProviderID(t *testing.T, gw *Gateway) [16]byte {
	t.Helper()
	p, ok := gw.view.Load().providers.get("echo")
	if !ok {
		t.Fatal("no provider echo")
	}
	return p.ID
}

// TestTracesViewImmutable: a published traces view (a slice header) keeps
// what it showed while runs are appended and the oldest dropped, through
// the reallocations of the array.
func TestTracesViewImmutable(t *testing.T) {
	rs := newRunState(3, 0, 400)
	type seen struct {
		view []*runRec
		ids  []string
	}
	var views []seen
	for i := range 40 {
		rs.apply(uint64(i+1), runRecorded{&runRec{ID: fmt.Sprint("r", i), StartedAt: fxAt.Add(time.Duration(i) * time.Minute)}})
		v := rs.traces
		var ids []string
		for _, r := range v {
			ids = append(ids, r.ID)
		}
		views = append(views, seen{v, ids})
	}
	for i, s := range views {
		for j, r := range s.view {
			if r == nil || r.ID != s.ids[j] {
				t.Fatalf("view %d changed at %d: %v, want %s", i, j, r, s.ids[j])
			}
		}
	}
}
