package gateway

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// planSummary is what a plan says about the things TestPlanRunOneView
// changes while it is read.
type planSummary struct {
	Prompt, Provider, UserContext string
	Fallbacks, Tools              []string
}

func summarize(pl RunPlan) planSummary {
	s := planSummary{Prompt: pl.Agent.SystemPrompt, Provider: pl.Provider.Name, UserContext: pl.UserContext}
	for _, f := range pl.Fallbacks {
		s.Fallbacks = append(s.Fallbacks, f.Provider.Name+"/"+f.Model)
	}
	for _, ct := range pl.Tools.Custom {
		s.Tools = append(s.Tools, ct.Name)
	}
	return s
}

// TestPlanRunOneView: the agent, its provider, its fallbacks, the user's
// USER.md and the custom tools of a plan come from one view. Between
// PlanRun's read of the agent and of the rest (testHookPlanned) another
// caller changes all of them: the plan shows none of the changes, with
// the view's version; the next plan shows all of them, with a later one.
// A plan made of several reads shows the new USER.md and tools beside the
// old agent.
func TestPlanRunOneView(t *testing.T) {
	cfg := DefaultConfig()
	cfg.ToolsExecEnabled, cfg.WorkspaceDir = true, t.TempDir()
	gw := start(newNode(t, cfg, nil))
	for _, name := range []string{"one", "two"} {
		if _, err := gw.CreateProvider(ctx(t), ProviderInput{Name: name, ProviderType: ProviderEcho, Enabled: true}); err != nil {
			t.Fatal(err)
		}
	}
	fbs := []FallbackInput{{Provider: "two", Model: "m2"}}
	if _, err := gw.CreateAgent(ctx(t), "alice", AgentInput{AgentKey: ptr("helper"), Provider: ptr("one"), Model: ptr("m1"),
		SystemPrompt: ptr("v1"), Fallbacks: &fbs}); err != nil {
		t.Fatal(err)
	}
	setUser := func(content string) {
		t.Helper()
		if _, err := gw.PutUserFile(ctx(t), "alice", "helper", "alice", UserFileName, content); err != nil {
			t.Fatal(err)
		}
	}
	addTool := func(name string) {
		t.Helper()
		in := CustomToolInput{Name: ptr(name), Command: []string{"true"}, AgentID: ptr("helper"), Enabled: ptr(true)}
		if _, err := gw.CreateCustomTool(ctx(t), in); err != nil {
			t.Fatal(err)
		}
	}
	setUser("v1")
	addTool("t1")

	changed := false
	testHookPlanned = func() {
		if changed {
			return
		}
		changed = true
		fbs := []FallbackInput{{Provider: "one", Model: "m1b"}}
		if _, err := gw.UpdateAgent(ctx(t), "alice", "helper", AgentInput{Provider: ptr("two"), SystemPrompt: ptr("v2"), Fallbacks: &fbs}); err != nil {
			t.Error(err)
		}
		setUser("v2")
		addTool("t2")
	}
	t.Cleanup(func() { testHookPlanned = nil })

	req := PlanRequest{Agent: "helper", For: Principal{User: "alice"}, Tools: true}
	before := gw.view.Load().version
	old, err := gw.PlanRun(ctx(t), req)
	if err != nil || !changed {
		t.Fatalf("PlanRun = %v (changed meanwhile: %v)", err, changed)
	}
	want := planSummary{Prompt: "v1", Provider: "one", UserContext: "v1", Fallbacks: []string{"two/m2"}, Tools: []string{"t1"}}
	if diff := cmp.Diff(want, summarize(old)); diff != "" || old.Version != before {
		t.Errorf("plan read while the agent changed mixes views (-one view +got):\n%s version %d, want %d", diff, old.Version, before)
	}
	cur, err := gw.PlanRun(ctx(t), req)
	if err != nil {
		t.Fatal(err)
	}
	want = planSummary{Prompt: "v2", Provider: "two", UserContext: "v2", Fallbacks: []string{"one/m1b"}, Tools: []string{"t1", "t2"}}
	if diff := cmp.Diff(want, summarize(cur)); diff != "" || cur.Version <= before {
		t.Errorf("next plan (-want +got):\n%s version %d, want > %d", diff, cur.Version, before)
	}
}

// TestPlanRunPolicyFirst: a plan for a principal who may not run the
// agent is ErrNotFound and holds nothing; a run for no agent plans the
// user's default agent; an agent that cannot run is planned without the
// rest (Runnable false); AnyCaller plans without policy.
func TestPlanRunPolicyFirst(t *testing.T) {
	gw := start(newNode(t, DefaultConfig(), nil))
	if _, err := gw.CreateProvider(ctx(t), ProviderInput{Name: "echo", ProviderType: ProviderEcho, Enabled: true}); err != nil {
		t.Fatal(err)
	}
	a, err := gw.CreateAgent(ctx(t), "alice", AgentInput{AgentKey: ptr("mine"), Provider: ptr("echo"), Model: ptr("m"), IsDefault: ptr(true)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := gw.PutUserFile(ctx(t), "alice", "mine", "alice", UserFileName, "Alice"); err != nil {
		t.Fatal(err)
	}
	pl, err := gw.PlanRun(ctx(t), PlanRequest{Agent: "mine", For: Principal{User: "bob"}})
	if !errors.Is(err, ErrNotFound) || pl.Agent.ID == a.ID || pl.UserContext != "" {
		t.Errorf("PlanRun(bob, alice's agent) = %+v, %v; want ErrNotFound and an empty plan", pl, err)
	}
	pl, err = gw.PlanRun(ctx(t), PlanRequest{For: Principal{User: "alice"}})
	if err != nil || pl.Agent.ID != a.ID || pl.UserContext != "Alice" || !pl.Runnable {
		t.Errorf("PlanRun(alice, no agent) = %+v, %v; want her default agent with her USER.md", pl, err)
	}
	if _, err := gw.PlanRun(ctx(t), PlanRequest{For: Principal{User: "bob"}}); !errors.Is(err, ErrNotFound) {
		t.Errorf("PlanRun(bob, no agent) = %v, want ErrNotFound", err)
	}
	if _, err := gw.UpdateAgent(ctx(t), "alice", "mine", AgentInput{Status: ptr(AgentDisabled)}); err != nil {
		t.Fatal(err)
	}
	pl, err = gw.PlanRun(ctx(t), PlanRequest{Agent: "mine", For: Principal{User: "alice"}})
	if err != nil || pl.Runnable || pl.UserContext != "" {
		t.Errorf("PlanRun(disabled agent) = %+v, %v; want the agent alone, not runnable", pl, err)
	}
	pl, err = gw.PlanRun(ctx(t), PlanRequest{Agent: "mine", For: Principal{User: "bob"}, AnyCaller: true, AnyStatus: true})
	if err != nil || pl.Agent.ID != a.ID || !pl.Runnable || pl.UserContext != "" {
		t.Errorf("PlanRun(bob, AnyCaller) = %+v, %v; want alice's agent, runnable, without her USER.md", pl, err)
	}
}
