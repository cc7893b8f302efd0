package agentrun

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"gatehouse/actors"
	"gatehouse/actors/actorstest"
	"gatehouse/actors/gateway"
	"gatehouse/actors/gateway/agentrun/llm/llmtest"
)

// budgetEnv is a runtime over a real gateway (actorstest) whose agents
// call llmtest stubs: "oa" (OpenAI, model gpt-b) and "claude"
// (Anthropic, model claude-b), each agent shared with every user.
type budgetEnv struct {
	gw     *gateway.Gateway
	rt     *Runtime
	oa     *llmtest.OpenAI
	ant    *llmtest.Anthropic
	agents map[string]gateway.Agent
	keys   map[string]uuid.UUID // user → their API key
}

var budgetUsers = []string{"u1", "u2", "u3"}

func newBudgetEnv(t *testing.T, cfg gateway.Config) *budgetEnv {
	t.Helper()
	n := actorstest.New(t, actorstest.WithExtensions(func() []actors.Extension {
		gw, err := gateway.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return []actors.Extension{gw}
	}))
	n.Start()
	e := &budgetEnv{gw: n.Exts[0].(*gateway.Gateway), oa: llmtest.NewOpenAI(t), ant: llmtest.NewAnthropic(t),
		agents: map[string]gateway.Agent{}, keys: map[string]uuid.UUID{}}
	ctx := actorstest.Ctx(t)
	prices := `{"prices":{"gpt-b":{"input":2,"output":8},"claude-b":{"input":3,"output":15,"cache_read":0.3,"cache_write":3.75}},"max_retries":0}`
	for _, p := range []gateway.ProviderInput{
		{Name: "oa", ProviderType: gateway.ProviderOpenAICompat, APIBase: e.oa.Base(), APIKey: ptrTo("sk-budget-oa-0001"), Enabled: true, Settings: []byte(prices)},
		{Name: "claude", ProviderType: "anthropic_native", APIBase: e.ant.URL, APIKey: ptrTo("sk-ant-budget-0001"), Enabled: true, Settings: []byte(prices)},
	} {
		if _, err := e.gw.CreateProvider(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	for key, pm := range map[string][2]string{"a1": {"oa", "gpt-b"}, "a2": {"claude", "claude-b"}} {
		a, err := e.gw.CreateAgent(ctx, "u1", gateway.AgentInput{AgentKey: ptrTo(key), Provider: ptrTo(pm[0]), Model: ptrTo(pm[1]),
			SharedWith: &budgetUsers, OtherConfig: &gateway.AgentOtherConfig{MaxTokens: 256}})
		if err != nil {
			t.Fatal(err)
		}
		e.agents[key] = a
	}
	for _, u := range budgetUsers {
		k, _, err := e.gw.CreateAPIKey(ctx, gateway.NewAPIKey{Name: u, Scopes: []gateway.Scope{gateway.ScopeWrite}, UserID: u})
		if err != nil {
			t.Fatal(err)
		}
		e.keys[u] = k.ID
	}
	e.rt = e.runtime(t, false)
	return e
}

// runtime is a Runtime over e's gateway, as package app makes it,
// enforcing budgets (with requireKnown: pricing.require_known); closed
// at the test's end.
func (e *budgetEnv) runtime(t *testing.T, requireKnown bool) *Runtime {
	t.Helper()
	g := e.gw
	rt, err := New(Deps{Agents: g, Recorder: g, Sessions: g, Prompts: g, Now: g.Now, Logger: g.Logger(),
		Memory: g, Delegations: g, Skills: g, Budgets: g, Prices: g, RequireKnownPrices: requireKnown})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = rt.Close(c)
	})
	return rt
}

func ptrTo[T any](v T) *T { return &v }

func (e *budgetEnv) budget(t *testing.T, typ, id, period string, usd float64, tokens, tpm int64) gateway.Budget {
	t.Helper()
	in := gateway.BudgetInput{Subject: &gateway.BudgetSubject{Type: typ, ID: id}, Period: &period}
	if usd > 0 {
		in.MaxUSD = &usd
	}
	if tokens > 0 {
		in.MaxTokens = &tokens
	}
	if tpm > 0 {
		in.MaxTokensPerMinute = &tpm
	}
	b, err := e.gw.CreateBudget(actorstest.Ctx(t), in)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// randomReply is one scripted provider answer: text, tool calls (a memory
// search, a delegation), an error after part of a stream, a 500, or a
// stream that hangs until the client leaves.
func randomReply(r *rand.Rand) llmtest.Reply {
	words := strings.Repeat("w ", 1+r.IntN(30))
	u := llmtest.Usage{Prompt: 20 + r.Int64N(400), Completion: 1 + r.Int64N(40)}
	switch k := r.IntN(10); {
	case k < 4:
		return llmtest.Reply{Text: words, Usage: u}
	case k == 4:
		return llmtest.Reply{ToolCalls: []llmtest.Call{{Name: "memory_search", Args: `{"query":"budget"}`}}, Usage: u}
	case k == 5:
		return llmtest.Reply{ToolCalls: []llmtest.Call{{Name: "delegate", Args: `{"agent":"a2","task":"sum it up"}`}}, Usage: u}
	case k == 6:
		return llmtest.Reply{Text: words, StreamErrorAfter: 2, ErrorType: "server_error", ErrorMessage: "boom"}
	case k == 7:
		return llmtest.Reply{Status: 500, ErrorType: "server_error", ErrorMessage: "down"}
	case k == 8:
		return llmtest.Reply{Text: words, Hang: true}
	}
	u.CacheRead = u.Prompt / 2
	return llmtest.Reply{Text: words, Usage: u}
}

// TestBudgetProperty: random concurrent runs (tools, delegations,
// streams, cancellations mid-stream, errors after partial output) against
// budgets of every subject and period. After every run has ended, no
// budget's settled spend exceeds its caps, nothing is still reserved, and
// each budget's spend is the sum of the costs of the calls of the runs it
// binds (from their traces).
func TestBudgetProperty(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 7))
	cfg := gateway.DefaultConfig()
	cfg.DefaultUserBudget = gateway.DefaultBudget{Period: gateway.PeriodDay, MaxUSD: 0.02} // binds u3
	e := newBudgetEnv(t, cfg)
	budgets := []gateway.Budget{
		e.budget(t, gateway.SubjectUser, "u1", gateway.PeriodDay, 0.05, 0, 0),
		e.budget(t, gateway.SubjectUser, "u2", gateway.PeriodMonth, 0, 15_000, 0),
		e.budget(t, gateway.SubjectAgent, e.agents["a1"].ID.String(), gateway.PeriodTotal, 0.06, 0, 0),
		e.budget(t, gateway.SubjectAgent, e.agents["a2"].ID.String(), gateway.PeriodMonth, 0, 20_000, 6_000),
	}
	if principalHasKey {
		budgets = append(budgets, e.budget(t, gateway.SubjectAPIKey, e.keys["u1"].String(), gateway.PeriodDay, 0, 12_000, 0))
	}
	for _, s := range []*llmtest.Script{&e.oa.Script, &e.ant.Script} {
		for range 600 {
			s.Push(randomReply(r))
		}
		s.Default = &llmtest.Reply{Text: "done", Usage: llmtest.Usage{Prompt: 30, Completion: 3}}
	}
	// Workers run one after another, all at once: budgets fill up over
	// the waves while concurrent calls contend for what is left.
	const workers, perWorker = 12, 14
	const runs = workers * perWorker
	type plan struct {
		user, agent      string
		stream, cancelAt bool
	}
	plans := make([][]plan, workers)
	for w := range plans {
		for range perWorker {
			plans[w] = append(plans[w], plan{budgetUsers[r.IntN(3)], []string{"a1", "a2"}[r.IntN(2)], r.IntN(2) == 0, r.IntN(4) == 0})
		}
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	refused := 0
	for w, ps := range plans {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i, p := range ps {
				ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
				req := TurnRequest{Agent: p.agent, Endpoint: "chat", Messages: []Message{{Role: "user", Content: fmt.Sprintf("run %d.%d", w, i)}}}
				if p.stream {
					req.OnDelta = func(string) error {
						if p.cancelAt {
							cancel() // the client leaves mid-stream
						}
						return nil
					}
				}
				_, err := e.rt.Turn(ctx, budgetPrincipal(p.user, e.keys[p.user]), req)
				cancel()
				if errors.Is(err, ErrBudget) {
					mu.Lock()
					refused++
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	t.Logf("%d runs, %d refused by a budget", runs, refused)
	traces := e.settledTraces(t, runs)
	for _, b := range append(budgets, e.defaultOf(t, "u3")) {
		got, err := e.gw.GetBudget(actorstest.Ctx(t), b.ID.String())
		if b.Default {
			got, err = e.defaultOf(t, "u3"), nil
		}
		if err != nil {
			t.Fatal(err)
		}
		wantNano, wantTokens := e.spentOn(t, b, traces)
		t.Logf("%s %s: spent %v USD %d tokens (caps %v USD, %v tokens)", b.Subject.Type, b.Period, got.SpentUSD, got.SpentTokens, deref(got.MaxUSD), deref(got.MaxTokens))
		switch {
		case got.ReservedUSD != 0 || got.ReservedTokens != 0:
			t.Errorf("%s %s: reserved %v USD %d tokens after every run ended", b.Subject, b.Period, got.ReservedUSD, got.ReservedTokens)
		case got.MaxUSD != nil && got.SpentUSD > *got.MaxUSD, got.MaxTokens != nil && got.SpentTokens > *got.MaxTokens:
			t.Errorf("%s %s: spent %v USD %d tokens, over its caps %v %v", b.Subject, b.Period, got.SpentUSD, got.SpentTokens, got.MaxUSD, got.MaxTokens)
		case got.SpentTokens != wantTokens || got.SpentUSD != float64(wantNano)/1e9:
			t.Errorf("%s %s: spent %v USD %d tokens, the traces' calls cost %v USD %d tokens", b.Subject, b.Period,
				got.SpentUSD, got.SpentTokens, float64(wantNano)/1e9, wantTokens)
		}
	}
}

// defaultOf is user's default budget as MyBudgets shows it.
func (e *budgetEnv) defaultOf(t *testing.T, user string) gateway.Budget {
	t.Helper()
	bs, err := e.gw.MyBudgets(actorstest.Ctx(t), user)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range bs {
		if b.Default {
			return b
		}
	}
	t.Fatalf("no default budget for %s", user)
	return gateway.Budget{}
}

// settledTraces waits for the runs' traces (recorded asynchronously; at
// least min of them, then no more arriving) and returns them with spans.
func (e *budgetEnv) settledTraces(t *testing.T, min int) []gateway.Trace {
	t.Helper()
	prev := -1
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		ts, err := e.gw.Traces(actorstest.Ctx(t), gateway.TraceFilter{Limit: 100_000, Spans: true})
		if err != nil {
			t.Fatal(err)
		}
		if len(ts) >= min && len(ts) == prev {
			return ts
		}
		prev = len(ts)
	}
	t.Fatal("traces did not settle")
	return nil
}

// spentOn sums the cost and tokens of the LLM calls of the traces b
// binds: their cost as the gateway priced them when it recorded the runs,
// apart from the budgets.
func (e *budgetEnv) spentOn(t *testing.T, b gateway.Budget, traces []gateway.Trace) (nano, tokens int64) {
	t.Helper()
	for _, tr := range traces {
		var binds bool
		switch b.Subject.Type {
		case gateway.SubjectUser:
			binds = tr.UserID == b.Subject.ID
		case gateway.SubjectAgent:
			binds = tr.AgentID.String() == b.Subject.ID
		case gateway.SubjectAPIKey:
			binds = e.keys[tr.UserID].String() == b.Subject.ID
		}
		if !binds {
			continue
		}
		for _, sp := range tr.Spans {
			if sp.Kind != gateway.SpanLLM || sp.PromptTokens+sp.CompletionTokens == 0 {
				continue
			}
			nano += sp.CostNano // priced by the gateway when it recorded the run
			tokens += sp.PromptTokens + sp.CompletionTokens
		}
	}
	return nano, tokens
}

// TestBudgetRefusesBeforeTheCall: a call whose worst case does not fit
// is refused with a *BudgetError naming the budget, and the provider
// receives nothing; max_tokens is sent as reserved.
func TestBudgetRefusesBeforeTheCall(t *testing.T) {
	e := newBudgetEnv(t, gateway.DefaultConfig())
	e.budget(t, gateway.SubjectUser, "u2", gateway.PeriodDay, 0, 5000, 0)
	ctx := actorstest.Ctx(t)
	req := TurnRequest{Agent: "a1", Endpoint: "chat", Messages: []Message{{Role: "user", Content: "hello"}}}
	if _, err := e.rt.Turn(ctx, budgetPrincipal("u2", uuid.Nil), req); err != nil {
		t.Fatalf("a call that fits: %v", err)
	}
	body := string(e.oa.Requests()[0].Body)
	if !strings.Contains(body, `"max_tokens":256`) && !strings.Contains(body, `"max_completion_tokens":256`) {
		t.Errorf("request sent without the bound it reserved for: %s", body)
	}
	e.budget(t, gateway.SubjectUser, "u3", gateway.PeriodDay, 0, 100, 0)
	_, err := e.rt.Turn(ctx, budgetPrincipal("u3", uuid.Nil), req)
	var be *BudgetError
	if !errors.As(err, &be) || !errors.Is(err, ErrBudget) || be.Subject.ID != "u3" || be.Period != gateway.PeriodDay || be.RetryAfter <= 0 {
		t.Fatalf("over budget: %v (%+v)", err, be)
	}
	if n := len(e.oa.Requests()); n != 1 {
		t.Errorf("provider got %d requests, want only the first", n)
	}
}

// principalHasKey: gateway.Principal carries the calling key (KeyID),
// so key budgets bind runs.
const principalHasKey = true

// budgetPrincipal is user calling with API key key.
func budgetPrincipal(user string, key uuid.UUID) gateway.Principal {
	return gateway.Principal{User: user, KeyID: key}
}

func deref[T any](p *T) any {
	if p == nil {
		return "-"
	}
	return *p
}

// TestBudgetRequireKnown: with pricing.require_known, a call to a model
// without a price is refused (gateway.ErrDisabled, 412) before anything is
// sent, budget or not; a priced model runs.
func TestBudgetRequireKnown(t *testing.T) {
	e := newBudgetEnv(t, gateway.DefaultConfig())
	e.rt = e.runtime(t, true)
	ctx := actorstest.Ctx(t)
	if _, err := e.gw.CreateAgent(ctx, "u1", gateway.AgentInput{AgentKey: ptrTo("unpriced"), Provider: ptrTo("oa"), Model: ptrTo("no-such-model-x")}); err != nil {
		t.Fatal(err)
	}
	req := TurnRequest{Agent: "unpriced", Endpoint: "chat", Messages: []Message{{Role: "user", Content: "hello"}}}
	if _, err := e.rt.Turn(ctx, budgetPrincipal("u1", uuid.Nil), req); !errors.Is(err, gateway.ErrDisabled) || !strings.Contains(err.Error(), "no-such-model-x") {
		t.Errorf("unpriced model under require_known: %v, want ErrDisabled naming the model", err)
	}
	if n := len(e.oa.Requests()); n != 0 {
		t.Errorf("provider got %d requests, want none", n)
	}
	req.Agent = "a1"
	if _, err := e.rt.Turn(ctx, budgetPrincipal("u1", uuid.Nil), req); err != nil {
		t.Errorf("priced model under require_known: %v", err)
	}
}

// TestSessionTurnCost: a session's turns are charged what their runs'
// calls cost (the spans' prices, as the traces show them): a tool-loop
// turn of two calls and a plain one.
func TestSessionTurnCost(t *testing.T) {
	e := newBudgetEnv(t, gateway.DefaultConfig())
	e.oa.Push(llmtest.Reply{ToolCalls: []llmtest.Call{{Name: "memory_search", Args: `{"query":"x"}`}}, Usage: llmtest.Usage{Prompt: 1000, Completion: 20}})
	e.oa.Push(llmtest.Reply{Text: "done", Usage: llmtest.Usage{Prompt: 1200, Completion: 30}})
	e.oa.Push(llmtest.Reply{Text: "again", Usage: llmtest.Usage{Prompt: 500, Completion: 10}})
	for _, msg := range []string{"first", "second"} {
		if _, err := e.rt.Turn(actorstest.Ctx(t), budgetPrincipal("u1", uuid.Nil), TurnRequest{Agent: "a1", SessionKey: "s1", Endpoint: "chat",
			Messages: []Message{{Role: "user", Content: msg}}}); err != nil {
			t.Fatal(err)
		}
	}
	traces := e.settledTraces(t, 2)
	var want int64
	for _, tr := range traces {
		want += tr.CostNano
	}
	// gpt-b: 2 USD per million in, 8 out.
	if want != (1000+1200+500)*2_000+(20+30+10)*8_000 {
		t.Fatalf("the traces cost %d nano-USD", want)
	}
	ss, _, err := e.gw.ListSessions(actorstest.Ctx(t), gateway.SessionFilter{UserID: "u1"}, false)
	if err != nil || len(ss) != 1 {
		t.Fatalf("sessions = %+v, %v", ss, err)
	}
	if got := ss[0].CostUSD; got != float64(want)/1e9 {
		t.Errorf("session cost_usd = %v, want %v (its runs' calls)", got, float64(want)/1e9)
	}
}
