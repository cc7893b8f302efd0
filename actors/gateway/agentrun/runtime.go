package agentrun

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"gatehouse/actors/gateway"
	"gatehouse/actors/gateway/agentrun/llm"
)

// Agents is what the runtime needs from the gateway's registry. All
// methods are safe for concurrent use.
type Agents interface {
	// PlanRun reads everything a run plans from (the agent, its provider
	// and fallbacks, the user's USER.md, skills, custom tools and MCP
	// access) from one view of the registry; gateway.ErrNotFound when
	// there is no such agent or req.For may not run it.
	PlanRun(ctx context.Context, req gateway.PlanRequest) (gateway.RunPlan, error)
	// ProviderKeys opens p's sealed credentials (api_key, then
	// api_keys), to call out only.
	ProviderKeys(p gateway.Provider) ([]string, error)
}

// Recorder takes the record of every finished run. A Recorder that
// also prices spans (an optional capability, spanPricer: the gateway's
// CostOf) gives a session's turns their cost; without it they cost 0.
type Recorder interface {
	// RecordRun records t (trace and usage); it does not wait.
	RecordRun(t gateway.Trace)
}

// The gateway is the production implementation of these.
var (
	_ Agents      = (*gateway.Gateway)(nil)
	_ Recorder    = (*gateway.Gateway)(nil)
	_ spanPricer  = (*gateway.Gateway)(nil)
	_ Sessions    = (*gateway.Gateway)(nil)
	_ Prompts     = (*gateway.Gateway)(nil)
	_ Memory      = (*gateway.Gateway)(nil)
	_ Delegations = (*gateway.Gateway)(nil)
	_ Skills      = (*gateway.Gateway)(nil)
)

// Request asks for one run.
type Request struct {
	// Agent is the agent's id or agent_key.
	Agent string
	// User is the run's user, for the trace and usage ("" for none).
	User string
	// Endpoint names the entry point in the trace ("chat.completions").
	Endpoint string
	// Channel is how the run came in, for the trace: "http", "ws",
	// "webhook", "internal" ("" reads as "http").
	Channel string
	// SessionKey is the run's session, if any, for the trace.
	SessionKey string
	// Messages follow the agent's system prompt.
	Messages []Message
	// System, when set, replaces the agent's system prompt (summoning and
	// regenerating ask the provider to write that prompt).
	System *string
	// AnyStatus runs an agent that is not active (one being summoned).
	AnyStatus bool
	// KeyID is the calling API key, whose budgets the run's calls are
	// charged to (uuid.Nil: none).
	KeyID uuid.UUID
}

// Run is one prepared run: the agent, its provider's call and the
// messages, ready for Execute.
type Run struct {
	// ID is 32 hex characters, unique; the trace's id.
	ID string
	// Agent is the agent as resolved.
	Agent gateway.Agent

	targets  []target // the agent's provider and model, then its fallbacks
	req      llm.Request
	user     string
	endpoint string
	channel  string
	session  string
	provider string // the provider that answered last (the primary until then)
	provType string
	model    string // the model that answered last
	redact   *redactor
	// keysRedacted: the providers whose keys redact already removes.
	keysRedacted map[uuid.UUID]bool
	// thinkingBy is the provider whose answers' reasoning blocks the
	// run's messages carry (uuid.Nil: none yet).
	thinkingBy uuid.UUID
	tools      []Tool
	skills     []gateway.RunSkill
	keyID      uuid.UUID // Request.KeyID (budgets)
	costNano   int64     // what the run's calls cost, for its session's turn (spanPricer)
}

// spanPricer is an optional capability of the Recorder (the gateway):
// the cost of a run's spans at their prices, which a session's turn
// records. Without it, turns cost 0.
type spanPricer interface {
	CostOf(spans []gateway.Span) int64
}

// Runtime runs agents: it resolves an agent and its provider, calls the
// provider within the agent's time limit and records every run. It is
// safe for concurrent use and keeps one shared HTTP transport for the
// openai_compat providers; Close releases its idle connections.
type Runtime struct {
	agents  Agents
	rec     Recorder
	http    *http.Client // the upstream pool every provider client shares
	pools   *pools
	metrics *callMetrics
	now     func() time.Time // a run's start time: the gateway's clock
	toolbox Toolbox          // nil: no tools but the built-ins
	// sessions and prompts: session turns, summoning and regenerating.
	sessions Sessions
	prompts  Prompts
	// The built-ins' stores (nil: that built-in is left out).
	memory      Memory
	delegations Delegations
	skills      Skills
	lg          *slog.Logger
	limits      Limits
	turnLock    TurnLock    // nil: one node
	budgets     *budgetHook // nil: no budgets enforced (budget.go)
	toolsJSON   toolsCache  // the runs' tools, encoded (toolsjson.go)

	// Background runs (summoning) end with bgCtx at Close.
	bgCtx  context.Context
	bgStop context.CancelFunc
	bg     sync.WaitGroup
}

// TurnLock serializes the turns of one session across the nodes of a
// cluster (on one node the session's tenant shard does): Lock waits until
// this node may run a turn of user's session key and holds every turn
// recorded before it; unlock releases it once the turn is recorded.
type TurnLock interface {
	Lock(ctx context.Context, user, key string) (unlock func(), err error)
}

// New returns a Runtime over d's collaborators (see Deps); an error
// names a required one missing.
func New(d Deps) (*Runtime, error) {
	if err := d.Validate(); err != nil {
		return nil, err
	}
	rt := &Runtime{agents: d.Agents, rec: d.Recorder, sessions: d.Sessions, prompts: d.Prompts, now: d.Now,
		toolbox: d.Toolbox, memory: d.Memory, delegations: d.Delegations, skills: d.Skills, turnLock: d.TurnLock,
		http: newHTTPClient(), limits: DefaultLimits(), lg: slog.New(slog.DiscardHandler)}
	if d.Logger != nil {
		rt.lg = d.Logger.With("component", "runtime")
	}
	if d.Budgets != nil {
		rt.budgets = &budgetHook{b: d.Budgets, prices: d.Prices, requireKnown: d.RequireKnownPrices}
	}
	rt.pools = newPools(rt.http, rt.limits.MaxAnswerBytes, d.Agents.ProviderKeys)
	rt.metrics = newCallMetrics(rt.pools)
	rt.bgCtx, rt.bgStop = context.WithCancel(context.Background())
	return rt, nil
}

// Close ends the background runs (an abandoned summon is marked
// summon_failed at the next start) and waits for them until ctx is done,
// then closes idle provider connections, and the toolbox's connections
// if it is a toolCloser. Call it once the listeners have drained; it
// returns ctx's error if the background runs did not end in time.
func (rt *Runtime) Close(ctx context.Context) error {
	rt.bgStop()
	done := make(chan struct{})
	go func() { rt.bg.Wait(); close(done) }()
	var err error
	select {
	case <-done:
	case <-ctx.Done():
		err = fmt.Errorf("close runtime: background runs: %w", ctx.Err())
	}
	rt.http.CloseIdleConnections()
	if c, ok := rt.toolbox.(toolCloser); ok {
		c.Close()
	}
	return err
}

// prepareRef plans agent req.Agent's run and prepares it. It decides
// no policy: it is for runs the domain starts after deciding it (and for
// tests); callers acting for someone use Turn. Errors: ErrAgentNotFound,
// ErrAgentDisabled, ErrProviderDisabled, or the registry's.
func (rt *Runtime) prepareRef(ctx context.Context, req Request) (*Run, error) {
	pl, err := rt.plan(ctx, req.Agent, gateway.Principal{User: req.User}, false, req)
	if err != nil {
		return nil, err
	}
	return rt.prepare(ctx, pl, req)
}

// plan is the turn's one planning read (Agents.PlanRun): agent ref (the
// default agent of p's user when "") with everything its run for p
// plans from; when decide, whether p may run it (policy) is decided on
// the same view before the rest is read. Then the agent must be able to
// run (ready). A run whose prompt is replaced (req.System) plans no
// USER.md, skills or tools.
func (rt *Runtime) plan(ctx context.Context, ref string, p gateway.Principal, decide bool, req Request) (gateway.RunPlan, error) {
	pl, err := rt.agents.PlanRun(ctx, gateway.PlanRequest{Agent: ref, For: p, AnyCaller: !decide, AnyStatus: req.AnyStatus,
		Bare: req.System != nil, Tools: rt.toolbox != nil && req.System == nil})
	if err != nil {
		return pl, notFound(err, cmp.Or(ref, "default agent"))
	}
	return pl, ready(pl.Agent, pl.Provider, req.AnyStatus)
}

// prepare builds the run planned in pl: the agent's system prompt (or
// req.System), the user's context, the skills, then req.Messages; and
// its tools (none when req.System is set). Errors: a credential that
// does not open, the toolbox's.
func (rt *Runtime) prepare(ctx context.Context, pl gateway.RunPlan, req Request) (*Run, error) {
	a, p := pl.Agent, pl.Provider
	all, skills := rt.preamble(pl, req)
	all = append(all, req.Messages...)
	rn := &Run{
		ID: strings.ReplaceAll(uuid.NewString(), "-", ""), Agent: a,
		targets: targets(pl), user: req.User, endpoint: req.Endpoint,
		channel: cmp.Or(req.Channel, "http"), session: req.SessionKey, provider: p.Name, provType: p.ProviderType, model: a.Model,
		redact: newRedactor(), keysRedacted: map[uuid.UUID]bool{}, skills: skills, keyID: req.KeyID,
		req: llm.Request{Model: a.Model, Messages: all, MaxTokens: a.OtherConfig.MaxTokens},
	}
	pp, err := rt.pools.get(p) // the primary's credentials open now, and redact from the start
	if err != nil {
		return nil, fmt.Errorf("provider %s credential: %w", p.ID, err)
	}
	rn.redact, rn.keysRedacted[p.ID] = rn.redact.with(pp.keys...), true
	if req.System == nil { // summoning writes a prompt: no tools
		if rn.tools, err = rt.toolsOf(ctx, rn, req, pl.Tools); err != nil {
			return nil, err
		}
	}
	return rn, nil
}

// preamble is what precedes a run's messages: the system prompt, the
// user's USER.md (in their runs only) and the agent's skills, as pl
// planned them.
func (rt *Runtime) preamble(pl gateway.RunPlan, req Request) ([]Message, []gateway.RunSkill) {
	all := make([]Message, 0, len(req.Messages)+3)
	system := pl.Agent.SystemPrompt
	if req.System != nil {
		system = *req.System
	}
	if system != "" {
		all = append(all, Message{Role: "system", Content: system})
	}
	if req.System != nil {
		return all, nil
	}
	if req.User != "" && pl.UserContext != "" {
		all = append(all, Message{Role: "system", Content: "About the user you are talking to (their USER.md):\n" + pl.UserContext})
	}
	if rt.skills == nil || len(pl.Skills) == 0 {
		return all, nil
	}
	all = append(all, Message{Role: "system", Content: skillsPrompt(pl.Skills)})
	return all, pl.Skills
}

// ToolsFor resolves agent ref (id or agent_key), decides whether p may
// run it, and only then lists the tools it would run with for p's user:
// what POST /v1/tools/invoke runs. Errors as Begin's.
func (rt *Runtime) ToolsFor(ctx context.Context, p gateway.Principal, ref string) (gateway.Agent, []Tool, error) {
	req := Request{Agent: ref, User: p.User, Endpoint: "tools.invoke"}
	pl, err := rt.plan(ctx, ref, p, true, req)
	if err != nil {
		return gateway.Agent{}, nil, err
	}
	rn, err := rt.prepare(ctx, pl, req)
	if err != nil {
		return gateway.Agent{}, nil, err
	}
	return rn.Agent, rn.tools, nil
}

// toolsOf lists the run's tools: the built-ins, then the toolbox's for
// the planned ones; a name already taken is dropped (custom tools cannot
// take a built-in's name; the toolbox prefixes MCP tools whose names
// collide).
func (rt *Runtime) toolsOf(ctx context.Context, rn *Run, req Request, planned gateway.RunTools) ([]Tool, error) {
	tools := rt.builtins(rn, req)
	if rt.toolbox != nil {
		ts, err := rt.toolbox.Tools(ctx, rn.Agent, planned)
		if err != nil {
			return nil, fmt.Errorf("agent tools: %w", err)
		}
		tools = append(tools, ts...)
	}
	seen := make(map[string]bool, len(tools))
	out := tools[:0]
	for _, t := range tools {
		if !seen[t.Name] {
			seen[t.Name] = true
			out = append(out, t)
		}
	}
	return out, nil
}

// execute calls the provider within the agent's time limit and records
// the run's trace and usage, whatever the outcome. onDelta, when not
// nil, gets each piece of content as it arrives (the provider streams)
// and may stop the run by returning an error. ctx ends the run early
// (the client went away); it should carry no shorter deadline than the
// agent's limit. Errors: a *TimeoutError (ErrAgentTimeout), a
// *ProviderError (ErrProvider), ctx's error, or onDelta's.
func (rt *Runtime) execute(ctx context.Context, rn *Run, onDelta func(string) error) (Result, error) {
	limit := time.Duration(rn.Agent.TimeoutSeconds) * time.Second
	runCtx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	start, t0 := rt.now(), time.Now()
	res, spans, err := rt.loop(runCtx, rn, onDelta)
	dur := time.Since(t0)
	status, msg := gateway.RunOK, ""
	switch {
	case err == nil:
	case errors.Is(runCtx.Err(), context.DeadlineExceeded) && ctx.Err() == nil:
		status, msg = gateway.RunTimeout, "agent time limit exceeded"
		err = &TimeoutError{Seconds: rn.Agent.TimeoutSeconds}
	case ctx.Err() != nil:
		status, msg = gateway.RunFailed, "client disconnected"
	default:
		status, msg = gateway.RunFailed, err.Error()
	}
	msg = rn.redact.preview(msg)
	if n := len(spans); n > 0 && status != gateway.RunOK && spans[n-1].Status != gateway.RunOK && spans[n-1].Kind == gateway.SpanLLM {
		spans[n-1].Status, spans[n-1].Error = status, msg // the call the run failed in
	}
	if sp, ok := rt.rec.(spanPricer); ok && rn.session != "" {
		rn.costNano = sp.CostOf(spans)
	}
	rt.rec.RecordRun(gateway.Trace{
		ID: rn.ID, AgentID: rn.Agent.ID, UserID: rn.user, SessionKey: rn.session, Endpoint: rn.endpoint,
		Channel: rn.channel, Provider: rn.provider, ProviderType: rn.provType, Model: rn.model, Status: status, Error: msg,
		StartedAt: start.UTC(), DurationMs: dur.Milliseconds(),
		InputPreview: rn.redact.preview(lastUserMessage(rn.req.Messages)), OutputPreview: rn.redact.preview(res.Content),
		Spans: spans, APIKeyID: rn.keyID,
	})
	return res, err
}

// targets lists where the planned agent's calls go: its provider and
// model, then its fallbacks that exist and are enabled, in order.
func targets(pl gateway.RunPlan) []target {
	out := make([]target, 1, 1+len(pl.Fallbacks))
	out[0] = target{p: pl.Provider, model: pl.Agent.Model}
	for _, f := range pl.Fallbacks {
		if f.Provider.Enabled { // a disabled one is skipped
			out = append(out, target{p: f.Provider, model: f.Model})
		}
	}
	return out
}

// lastUserMessage is the content of the last user message ("" if none).
func lastUserMessage(msgs []Message) string {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == "user" {
			return msgs[i].Content
		}
	}
	return ""
}

// spanID is 16 random hex characters.
func spanID() string { return strings.ReplaceAll(uuid.NewString(), "-", "")[:16] }
