package gateway

import (
	"errors"
	"testing"
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
	if _, err := gw.CreateProvider(ctx(t), ProviderInput{Name: "echo", ProviderType: ProviderEcho, Enabled: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := gw.CreateAgent(ctx(t), "alice", AgentInput{AgentKey: ptr("p"), Provider: ptr("echo"), Model: ptr("m"),
		OtherConfig: &AgentOtherConfig{Description: "a pirate"}}); err != nil {
		t.Fatal(err)
	}
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
