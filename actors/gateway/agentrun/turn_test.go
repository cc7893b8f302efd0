package agentrun

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/google/uuid"

	"gatehouse/actors/gateway"
)

// countingToolbox counts tool resolutions (where MCP servers connect).
type countingToolbox struct{ n atomic.Int64 }

func (b *countingToolbox) Tools(context.Context, gateway.Agent, gateway.RunTools) ([]Tool, error) {
	b.n.Add(1)
	return nil, nil
}

// countingGateway counts what planning a run reads about the user.
type countingGateway struct {
	*fakeGateway
	userContext, skills atomic.Int64
}

func newCountingGateway() *countingGateway {
	g := &countingGateway{fakeGateway: newFake()}
	g.fakeGateway.userContext = func(uuid.UUID, string) string { g.userContext.Add(1); return "" }
	g.fakeGateway.skills = func(uuid.UUID) []gateway.RunSkill { g.skills.Add(1); return nil }
	return g
}

func (g *countingGateway) ReadSkillFile(context.Context, string, string, int, string) ([]byte, error) {
	return nil, gateway.ErrNotFound
}

// TestTurnDecidesPolicyFirst: a principal who may not run the agent is
// refused with ErrAgentNotFound having caused no user-context or skills
// read, no tool resolution (MCP) and no provider call; one who may, runs.
func TestTurnDecidesPolicyFirst(t *testing.T) {
	var calls atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		calls.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"choices":[{"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}]}`))
	}))
	defer srv.Close()
	f := newCountingGateway()
	f.add("private", gateway.ProviderOpenAICompat, srv.URL, `{}`, func(a *gateway.Agent, _ *gateway.Provider) { a.OwnerID = "alice" })
	box := &countingToolbox{}
	rt := newRuntime(t, f.fakeGateway, func(d *Deps) { d.Skills, d.Toolbox = f, box })
	req := TurnRequest{Agent: "private", Endpoint: "test", Messages: []Message{{Role: "user", Content: "x"}}}

	for _, p := range []gateway.Principal{{User: "mallory"}, {User: "mallory", Trusted: true}, {}, {User: "alice", BoundAgent: uuid.New()}} {
		if _, err := rt.Turn(context.Background(), p, req); !errors.Is(err, ErrAgentNotFound) {
			t.Errorf("Turn(%+v) = %v, want ErrAgentNotFound", p, err)
		}
		if _, _, err := rt.ToolsFor(context.Background(), p, "private"); !errors.Is(err, ErrAgentNotFound) {
			t.Errorf("ToolsFor(%+v) = %v, want ErrAgentNotFound", p, err)
		}
	}
	if n, u, s, c := box.n.Load(), f.userContext.Load(), f.skills.Load(), calls.Load(); n+u+s+c != 0 {
		t.Fatalf("refused turns: %d tool resolutions, %d user-context reads, %d skills reads, %d provider calls; want none", n, u, s, c)
	}
	res, err := rt.Turn(context.Background(), gateway.Principal{User: "alice"}, req)
	if err != nil || res.Content != "hi" || len(res.RunID) != 32 {
		t.Fatalf("Turn(alice) = %+v, %v", res, err)
	}
	if n, c := box.n.Load(), calls.Load(); n != 1 || c != 1 {
		t.Errorf("alice's turn: %d tool resolutions, %d provider calls; want 1 and 1", n, c)
	}
}

// TestTurnDefaultAgent: no agent named runs the principal's default
// agent; none is ErrAgentNotFound.
func TestTurnDefaultAgent(t *testing.T) {
	f := &defaultsGateway{fakeGateway: newFake()}
	f.add("mine", gateway.ProviderEcho, "", `{"delay_ms":0}`, func(a *gateway.Agent, _ *gateway.Provider) { a.OwnerID = "alice" })
	f.def = f.agents["mine"]
	f.agents[f.def.ID.String()] = f.def // resolved by id
	f.fakeGateway.defaultAgent = func(user string) (gateway.Agent, error) { return f.DefaultAgent(context.Background(), user) }
	rt := newRuntime(t, f.fakeGateway)
	req := TurnRequest{Endpoint: "test", Messages: []Message{{Role: "user", Content: "hello"}}}
	res, err := rt.Turn(context.Background(), gateway.Principal{User: "alice"}, req)
	if err != nil || res.Agent.AgentKey != "mine" || res.Content != "echo: hello" {
		t.Errorf("Turn(alice, no agent) = %+v, %v; want her default agent's answer", res, err)
	}
	if _, err := rt.Turn(context.Background(), gateway.Principal{User: "bob"}, req); !errors.Is(err, ErrAgentNotFound) {
		t.Errorf("Turn(bob, no agent) = %v, want ErrAgentNotFound", err)
	}
}

// defaultsGateway has a default agent for its owner only.
type defaultsGateway struct {
	*fakeGateway
	def gateway.Agent
}

func (g *defaultsGateway) DefaultAgent(_ context.Context, user string) (gateway.Agent, error) {
	if user != g.def.OwnerID {
		return gateway.Agent{}, gateway.ErrNotFound
	}
	return g.def, nil
}

// TestTurnPlansOnce: a turn, a run for no agent (the default agent) and
// a tools listing each make one planning read (PlanRun), whatever the
// agent has: fallbacks, USER.md, skills, tools.
func TestTurnPlansOnce(t *testing.T) {
	f := newCountingGateway()
	f.add("fb", gateway.ProviderEcho, "", `{"delay_ms":0}`, nil)
	f.add("main", gateway.ProviderEcho, "", `{"delay_ms":0}`, func(a *gateway.Agent, _ *gateway.Provider) {
		a.OwnerID = "alice"
		a.Fallbacks = []gateway.Fallback{{ProviderID: f.agents["fb"].ProviderID, Model: "m2"}}
	})
	def := f.agents["main"]
	f.agents[def.ID.String()] = def
	f.fakeGateway.defaultAgent = func(string) (gateway.Agent, error) { return def, nil }
	rt := newRuntime(t, f.fakeGateway, withToolbox(&countingToolbox{}))
	alice := gateway.Principal{User: "alice"}
	for _, ref := range []string{"main", ""} {
		f.plans.Store(0)
		_, err := rt.Turn(context.Background(), alice, TurnRequest{Agent: ref, Endpoint: "test", Messages: []Message{{Role: "user", Content: "hi"}}})
		if n := f.plans.Load(); err != nil || n != 1 {
			t.Errorf("Turn(agent %q) = %v with %d planning reads, want 1", ref, err, n)
		}
	}
	f.plans.Store(0)
	if _, _, err := rt.ToolsFor(context.Background(), alice, "main"); err != nil || f.plans.Load() != 1 {
		t.Errorf("ToolsFor = %v with %d planning reads, want 1", err, f.plans.Load())
	}
}
