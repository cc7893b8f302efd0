package gateway

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

// TestSummonSurvivesRestart: a summon the process died during ends
// summon_failed at the next start, never stuck; FinishSummon records an
// outcome once; resummon retries.
func TestSummonSurvivesRestart(t *testing.T) {
	n := newNode(t, DefaultConfig(), nil)
	gw := start(n)
	if _, err := gw.CreateProvider(ctx(t), ProviderInput{Name: "echo", ProviderType: ProviderEcho, Enabled: true}); err != nil {
		t.Fatal(err)
	}
	a, err := gw.CreateAgent(ctx(t), "alice", AgentInput{AgentKey: ptr("p"), Provider: ptr("echo"), Model: ptr("m"),
		OtherConfig: &AgentOtherConfig{Description: "a pirate"}})
	if err != nil || a.Status != AgentSummoning {
		t.Fatalf("CreateAgent = %+v, %v; want summoning", a, err)
	}
	n.Restart() // kill -9 while the summon runs
	gw = n.Exts[0].(*Gateway)
	got, err := gw.GetAgent(ctx(t), "alice", "p")
	if err != nil || got.Status != AgentSummonFailed || got.SummonError != interruptedSummon {
		t.Fatalf("after a restart mid-summon = %+v, %v; want summon_failed (interrupted)", got, err)
	}
	if _, err := gw.FinishSummon(ctx(t), a.ID, "late", ""); !errors.Is(err, ErrInUse) {
		t.Errorf("FinishSummon after the restart = %v, want ErrInUse", err)
	}
	if r, err := gw.Resummon(ctx(t), "alice", "p"); err != nil || r.Status != AgentSummoning {
		t.Fatalf("Resummon = %+v, %v", r, err)
	}
	if _, err := gw.Resummon(ctx(t), "alice", "p"); !errors.Is(err, ErrInUse) {
		t.Errorf("Resummon while summoning = %v, want ErrInUse", err)
	}
	if r, err := gw.FinishSummon(ctx(t), a.ID, "Arr.", ""); err != nil || r.Status != AgentActive || r.SystemPrompt != "Arr." {
		t.Fatalf("FinishSummon = %+v, %v", r, err)
	}
	n.Restart()
	gw = n.Exts[0].(*Gateway)
	if got, _ := gw.GetAgent(ctx(t), "alice", "p"); got.Status != AgentActive || got.SystemPrompt != "Arr." {
		t.Errorf("after restart = %+v, want the summoned prompt, active", got)
	}
}

// TestSummonOnAnotherNode: in cluster mode a node's start fails only the
// summons it ran itself; one running on another node stays summoning.
func TestSummonOnAnotherNode(t *testing.T) {
	node := "n1"
	n := newNode(t, DefaultConfig(), func(g *Gateway) { g.cfg.NodeID = node })
	gw := start(n)
	summoning(t, gw)
	node = "n2" // another node starts on the same state
	n.Restart()
	gw = n.Exts[0].(*Gateway)
	if got, err := gw.GetAgent(ctx(t), "alice", "p"); err != nil || got.Status != AgentSummoning {
		t.Fatalf("after another node's start = %+v, %v; want still summoning", got, err)
	}
	node = "n1" // the node that ran it starts again: the summon died with it
	n.Restart()
	gw = n.Exts[0].(*Gateway)
	if got, err := gw.GetAgent(ctx(t), "alice", "p"); err != nil || got.Status != AgentSummonFailed {
		t.Fatalf("after its own node's restart = %+v, %v; want summon_failed", got, err)
	}
}

// TestSummonOfANodeThatLeft: in cluster mode a summon whose node is out
// of the cluster for OrphanedSummonAfter fails on the nodes that remain,
// and not before; while its node is a member it stays summoning.
func TestSummonOfANodeThatLeft(t *testing.T) {
	node := "n1"
	n := newNode(t, DefaultConfig(), func(g *Gateway) { g.cfg.NodeID = node })
	gw := start(n)
	summoning(t, gw)
	node = "n2" // another node of the cluster, on the same state
	n.Restart()
	gw = n.Exts[0].(*Gateway)
	var members atomic.Pointer[[]string]
	members.Store(&[]string{"n1", "n2"})
	gw.SetMembers(func() []string { return *members.Load() })
	sweep := func() {
		n.Clock.Advance(summonSweepEvery)
		n.Sys.Tick()
		for gw.summons.running.Load() {
			time.Sleep(time.Millisecond)
		}
	}
	status := func() (string, string) {
		a, err := gw.GetAgent(ctx(t), "alice", "p")
		if err != nil {
			t.Fatal(err)
		}
		return a.Status, a.SummonError
	}
	for range 8 { // 40 s with its node in the cluster
		sweep()
	}
	if st, _ := status(); st != AgentSummoning {
		t.Fatalf("with its node a member: %s, want summoning", st)
	}
	members.Store(&[]string{"n2"}) // n1 leaves
	for range int(OrphanedSummonAfter / summonSweepEvery) {
		sweep()
		if st, _ := status(); st != AgentSummoning {
			t.Fatalf("%s before its node was gone for %v", st, OrphanedSummonAfter)
		}
	}
	sweep()
	if st, why := status(); st != AgentSummonFailed || why != orphanedSummon("n1") {
		t.Fatalf("after its node was gone for %v: %s (%q), want summon_failed", OrphanedSummonAfter, st, why)
	}
	n.Restart()
	gw = n.Exts[0].(*Gateway)
	if st, _ := status(); st != AgentSummonFailed {
		t.Fatalf("after a restart: %s, want the failure kept", st)
	}
}

// summoning creates alice's agent "p" with a description and no prompt
// (so it starts summoning) on an echo provider.
func summoning(t *testing.T, gw *Gateway) {
	t.Helper()
	if _, err := gw.CreateProvider(ctx(t), ProviderInput{Name: "echo", ProviderType: ProviderEcho, Enabled: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := gw.CreateAgent(ctx(t), "alice", AgentInput{AgentKey: ptr("p"), Provider: ptr("echo"), Model: ptr("m"),
		OtherConfig: &AgentOtherConfig{Description: "a pirate"}}); err != nil {
		t.Fatal(err)
	}
}
