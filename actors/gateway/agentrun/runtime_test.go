package agentrun

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"
	"go.uber.org/goleak"

	"gatehouse/actors/gateway"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeGateway is the registry and the run recorder, in memory.
type fakeGateway struct {
	agents    map[string]gateway.Agent
	providers map[uuid.UUID]gateway.Provider
	keys      map[uuid.UUID][]string // a provider's keys; default ["sk-test"]
	keyErr    error
	// The optional parts of a plan: a user's USER.md, an agent's skills
	// and a user's default agent (nil: none). Each is called only once
	// the plan's policy allowed the run.
	userContext  func(agent uuid.UUID, user string) string
	skills       func(agent uuid.UUID) []gateway.RunSkill
	defaultAgent func(user string) (gateway.Agent, error)
	plans        atomic.Int64 // PlanRun calls

	mu     sync.Mutex
	traces []gateway.Trace
}

func newFake() *fakeGateway {
	return &fakeGateway{agents: map[string]gateway.Agent{}, providers: map[uuid.UUID]gateway.Provider{}, keys: map[uuid.UUID][]string{}}
}

func (f *fakeGateway) ResolveAgent(_ context.Context, ref string) (gateway.Agent, gateway.Provider, error) {
	a, ok := f.agents[ref]
	if !ok {
		return gateway.Agent{}, gateway.Provider{}, fmt.Errorf("resolve %s: %w", ref, gateway.ErrNotFound)
	}
	return a, f.providers[a.ProviderID], nil
}

func (f *fakeGateway) ProviderKeys(p gateway.Provider) ([]string, error) {
	if keys, ok := f.keys[p.ID]; ok {
		return keys, f.keyErr
	}
	return []string{"sk-test"}, f.keyErr
}

func (f *fakeGateway) GetProvider(_ context.Context, ref string) (gateway.Provider, error) {
	for _, p := range f.providers {
		if p.ID.String() == ref || p.Name == ref {
			return p, nil
		}
	}
	return gateway.Provider{}, fmt.Errorf("provider %s: %w", ref, gateway.ErrNotFound)
}

// PlanRun plans as the gateway does, from the fake's maps: the agent
// (the default agent when ref is ""), the policy, then the rest.
func (f *fakeGateway) PlanRun(ctx context.Context, req gateway.PlanRequest) (gateway.RunPlan, error) {
	f.plans.Add(1)
	ref := req.Agent
	if ref == "" {
		if f.defaultAgent == nil {
			return gateway.RunPlan{}, gateway.ErrNotFound
		}
		d, err := f.defaultAgent(req.For.User)
		if err != nil {
			return gateway.RunPlan{}, err
		}
		ref = d.ID.String()
	}
	a, p, err := f.ResolveAgent(ctx, ref)
	if err != nil {
		return gateway.RunPlan{}, err
	}
	if !req.AnyCaller && !req.For.MayRun(&a) {
		return gateway.RunPlan{}, fmt.Errorf("agent %q: %w", ref, gateway.ErrNotFound)
	}
	pl := gateway.RunPlan{Agent: a, Provider: p, Runnable: (a.Status == gateway.AgentActive || req.AnyStatus) && p.Enabled}
	if !pl.Runnable {
		return pl, nil
	}
	for _, fb := range a.Fallbacks {
		if fp, err := f.GetProvider(ctx, fb.ProviderID.String()); err == nil {
			pl.Fallbacks = append(pl.Fallbacks, gateway.PlannedFallback{Provider: fp, Model: fb.Model})
		}
	}
	if req.Bare {
		return pl, nil
	}
	if req.For.User != "" && f.userContext != nil {
		pl.UserContext = f.userContext(a.ID, req.For.User)
	}
	if f.skills != nil {
		pl.Skills = f.skills(a.ID)
	}
	return pl, nil
}

func (f *fakeGateway) RecordRun(t gateway.Trace) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.traces = append(f.traces, t)
}

func (f *fakeGateway) lastTrace(t *testing.T) gateway.Trace {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.traces) == 0 {
		t.Fatal("no run recorded")
	}
	return f.traces[len(f.traces)-1]
}

// add registers an agent named key on a new provider of type typ.
func (f *fakeGateway) add(key, typ, base, settings string, edit func(*gateway.Agent, *gateway.Provider)) {
	p := gateway.Provider{ID: uuid.New(), Name: key + "-p", ProviderType: typ, APIBase: base, Enabled: true, Settings: json.RawMessage(settings)}
	a := gateway.Agent{ID: uuid.New(), AgentKey: key, ProviderID: p.ID, Model: "m1", SystemPrompt: "be brief", Status: gateway.AgentActive, TimeoutSeconds: 5}
	if edit != nil {
		edit(&a, &p)
	}
	f.agents[key], f.providers[p.ID] = a, p
}

// noSessions refuses session turns and prompts: the fake has neither.
type noSessions struct{}

var errNoSessions = errors.New("fake: no sessions")

func (noSessions) QueueTurn(string, string, string, string, context.CancelFunc) func(context.Context) (gateway.Turn, error) {
	return func(context.Context) (gateway.Turn, error) { return gateway.Turn{}, errNoSessions }
}

func (noSessions) QueueChannelTurn(string, uuid.UUID, string, string, context.CancelFunc) func(context.Context) (gateway.Turn, error) {
	return func(context.Context) (gateway.Turn, error) { return gateway.Turn{}, errNoSessions }
}

func (noSessions) EndTurn(context.Context, string, string, gateway.TurnResult) (gateway.Session, error) {
	return gateway.Session{}, errNoSessions
}

func (noSessions) SessionOp(context.Context, string, string, string, bool, *string) (gateway.Session, error) {
	return gateway.Session{}, errNoSessions
}

func (noSessions) GetAgent(context.Context, string, string) (gateway.Agent, error) {
	return gateway.Agent{}, errNoSessions
}

func (noSessions) UpdateAgent(context.Context, string, string, gateway.AgentInput) (gateway.Agent, error) {
	return gateway.Agent{}, errNoSessions
}

func (noSessions) FinishSummon(context.Context, uuid.UUID, string, string) (gateway.Agent, error) {
	return gateway.Agent{}, errNoSessions
}

// newRuntime is a Runtime over f (which plans and records; no sessions,
// no built-ins), changed by opts, closed at the test's end.
func newRuntime(tb testing.TB, f *fakeGateway, opts ...func(*Deps)) *Runtime {
	tb.Helper()
	d := Deps{Agents: f, Recorder: f, Sessions: noSessions{}, Prompts: noSessions{}, Now: time.Now}
	for _, o := range opts {
		o(&d)
	}
	rt, err := New(d)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = rt.Close(context.Background()) })
	return rt
}

// withToolbox gives the runtime tb.
func withToolbox(tb Toolbox) func(*Deps) { return func(d *Deps) { d.Toolbox = tb } }

func TestPrepareErrors(t *testing.T) {
	f := newFake()
	f.add("ok", gateway.ProviderEcho, "", `{}`, nil)
	f.add("off", gateway.ProviderEcho, "", `{}`, func(a *gateway.Agent, _ *gateway.Provider) { a.Status = gateway.AgentDisabled })
	f.add("nop", gateway.ProviderEcho, "", `{}`, func(_ *gateway.Agent, p *gateway.Provider) { p.Enabled = false })
	rt := newRuntime(t, f)
	tests := []struct {
		agent string
		want  error
	}{
		{"ok", nil},
		{"ghost", ErrAgentNotFound},
		{"off", ErrAgentDisabled},
		{"nop", ErrProviderDisabled},
	}
	for _, tt := range tests {
		rn, err := rt.prepareRef(context.Background(), Request{Agent: tt.agent})
		if !errors.Is(err, tt.want) || (err == nil) != (rn != nil) {
			t.Errorf("Prepare(%s) = %v, %v; want %v", tt.agent, rn, err, tt.want)
		}
	}
	f.keyErr = errors.New("tag mismatch")
	rt = newRuntime(t, f) // a runtime opens a provider's keys once, at its first run
	if _, err := rt.prepareRef(context.Background(), Request{Agent: "ok"}); err == nil || !strings.Contains(err.Error(), "tag mismatch") {
		t.Errorf("Prepare with a credential that does not open = %v", err)
	}
}

func TestExecuteEcho(t *testing.T) {
	f := newFake()
	f.add("echo", gateway.ProviderEcho, "", `{"delay_ms":0}`, nil)
	rt := newRuntime(t, f)
	rn, err := rt.prepareRef(context.Background(), Request{Agent: "echo", User: "alice", Endpoint: "test",
		Messages: []Message{{Role: "user", Content: "hello there"}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(rn.ID) != 32 || strings.Contains(rn.ID, "-") {
		t.Errorf("run id = %q, want 32 hex characters", rn.ID)
	}
	var deltas []string
	res, err := rt.execute(context.Background(), rn, func(d string) error { deltas = append(deltas, d); return nil })
	if err != nil {
		t.Fatal(err)
	}
	want := Result{Content: "echo: hello there", PromptTokens: 4, CompletionTokens: 3, FinishReason: "stop"} // "be brief" + 2 words
	if diff := cmp.Diff(want, res); diff != "" {
		t.Errorf("Execute (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"echo:", " hello", " there"}, deltas); diff != "" {
		t.Errorf("deltas (-want +got):\n%s", diff)
	}
	tr := f.lastTrace(t)
	if tr.ID != rn.ID || tr.UserID != "alice" || tr.Endpoint != "test" || tr.Status != gateway.RunOK ||
		len(tr.Spans) != 1 || tr.Spans[0].Name != "llm.call m1" || tr.Spans[0].CompletionTokens != 3 {
		t.Errorf("trace = %+v", tr)
	}
}

// upstream is an OpenAI-compatible endpoint that answers with status, or
// hangs until the request ends when status is 0.
func upstream(t *testing.T, status int) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body) // so that a client that goes away ends r's context
		if status == 0 {
			<-r.Context().Done()
			return
		}
		w.WriteHeader(status)
		fmt.Fprint(w, `{"choices":[{"message":{"content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":2,"completion_tokens":1}}`)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func TestExecuteFailures(t *testing.T) {
	f := newFake()
	f.add("ok", gateway.ProviderOpenAICompat, upstream(t, 200), ``, nil)
	f.add("down", gateway.ProviderOpenAICompat, upstream(t, 500), ``, nil)
	f.add("slow", gateway.ProviderOpenAICompat, upstream(t, 0), ``, func(a *gateway.Agent, _ *gateway.Provider) { a.TimeoutSeconds = 1 })
	f.add("gone", gateway.ProviderOpenAICompat, "http://127.0.0.1:1", ``, nil)
	rt := newRuntime(t, f)
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		agent  string
		ctx    context.Context
		check  func(error) bool
		status string
		span   string // the span's error
	}{
		{"ok", context.Background(), func(err error) bool { return err == nil }, gateway.RunOK, ""},
		{"down", context.Background(), func(err error) bool {
			var pe *ProviderError
			return errors.As(err, &pe) && pe.Detail == "status 500: Internal Server Error" && errors.Is(err, ErrProvider)
		}, gateway.RunFailed, "provider: status 500: Internal Server Error"},
		{"gone", context.Background(), func(err error) bool { return errors.Is(err, ErrProvider) }, gateway.RunFailed, "provider: connection refused"},
		{"slow", context.Background(), func(err error) bool {
			var te *TimeoutError
			return errors.As(err, &te) && te.Seconds == 1 && errors.Is(err, ErrAgentTimeout)
		}, gateway.RunTimeout, "agent time limit exceeded"},
		{"ok", cancelled, func(err error) bool { return errors.Is(err, context.Canceled) }, gateway.RunFailed, "client disconnected"},
	}
	for _, tt := range tests {
		t.Run(tt.agent, func(t *testing.T) {
			rn, err := rt.prepareRef(context.Background(), Request{Agent: tt.agent, Messages: []Message{{Role: "user", Content: "x"}}})
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			_, err = rt.execute(tt.ctx, rn, nil)
			if !tt.check(err) {
				t.Errorf("Execute = %v", err)
			}
			if time.Since(start) > 4*time.Second {
				t.Errorf("Execute took %v", time.Since(start))
			}
			if tr := f.lastTrace(t); tr.Status != tt.status || tr.Spans[0].Error != tt.span {
				t.Errorf("trace status %q error %q, want %q %q", tr.Status, tr.Spans[0].Error, tt.status, tt.span)
			}
		})
	}
}

// TestNewRequiresDeps: New refuses Deps without a required collaborator,
// naming it, and takes Deps with every one.
func TestNewRequiresDeps(t *testing.T) {
	f := newFake()
	full := Deps{Agents: f, Recorder: f, Sessions: noSessions{}, Prompts: noSessions{}, Now: time.Now}
	tests := []struct {
		field string
		drop  func(*Deps)
	}{
		{"Agents", func(d *Deps) { d.Agents = nil }},
		{"Recorder", func(d *Deps) { d.Recorder = nil }},
		{"Sessions", func(d *Deps) { d.Sessions = nil }},
		{"Prompts", func(d *Deps) { d.Prompts = nil }},
		{"Now", func(d *Deps) { d.Now = nil }},
	}
	for _, tt := range tests {
		d := full
		tt.drop(&d)
		if rt, err := New(d); err == nil || !strings.Contains(err.Error(), "Deps."+tt.field) {
			t.Errorf("New(Deps without %s) = %v, %v; want an error naming it", tt.field, rt, err)
		}
	}
	rt, err := New(full)
	if err != nil {
		t.Fatalf("New(every required Deps) = %v", err)
	}
	_ = rt.Close(context.Background())
}
