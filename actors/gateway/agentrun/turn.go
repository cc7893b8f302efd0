package agentrun

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"gatehouse/actors/gateway"
)

// A turn is the one way an agent runs for a caller, whatever the
// transport: resolve the agent (the default agent when none is named),
// decide policy, begin the session turn if there is a session, prepare
// (skills, user context, tools, MCP), execute the tool loop, record (the
// trace, with its session key, and the session's turn).

// Sessions serializes each session's turns and records them; the
// gateway's registry. Safe for concurrent use.
type Sessions interface {
	// QueueTurn queues a turn of session key for user with agent ref ("":
	// the session's); the returned wait begins it in queue order. cancel
	// is called when the turn is aborted.
	QueueTurn(key, agentRef, user, channel string, cancel context.CancelFunc) func(ctx context.Context) (gateway.Turn, error)
	// QueueChannelTurn is QueueTurn for a channel instance's sender, who
	// may run the instance's agent without its being shared with them.
	QueueChannelTurn(key string, agent uuid.UUID, user, channel string, cancel context.CancelFunc) func(ctx context.Context) (gateway.Turn, error)
	// EndTurn appends the turn's outcome and begins the next queued one;
	// gateway.ErrNotFound when the session was deleted meanwhile.
	EndTurn(ctx context.Context, user, key string, res gateway.TurnResult) (gateway.Session, error)
	// SessionOp with op "get" reads user's session key with its
	// messages: what a turn reads again under a TurnLock.
	SessionOp(ctx context.Context, op, key, user string, admin bool, label *string) (gateway.Session, error)
}

// recordTimeout bounds the write that ends a session turn, which is made
// even when the run's context has ended.
const recordTimeout = 10 * time.Second

// TurnRequest asks for one turn of an agent.
type TurnRequest struct {
	// Agent is the agent's id or agent_key; "" is the session's agent in
	// a session, else the principal's default agent.
	Agent string
	// SessionKey, when set, makes the run a turn of that session: its
	// history precedes Messages and the turn is appended to it.
	SessionKey string
	// Queued is the wait of a session turn the transport queued already
	// (a WebSocket reader does, to keep frame order); nil: Begin queues.
	Queued func(ctx context.Context) (gateway.Turn, error)
	// Messages follow the agent's prompt (and the session's history); in a
	// session, the last user message is what the turn records as asked.
	Messages []Message
	// Endpoint and Channel name the entry point and the transport in the
	// trace ("chat.completions", "http").
	Endpoint, Channel string
	// System, when set, replaces the agent's prompt and the run gets no
	// tools (summoning and regenerating write that prompt).
	System *string
	// AnyStatus runs an agent that is not active (one being summoned).
	AnyStatus bool
	// OnDelta, when not nil, gets the content as it streams (Turn only).
	OnDelta func(string) error
}

// Turn is a begun turn: policy decided, the session turn begun, the run
// prepared; RunTurn runs it once. ID and Agent are known before it runs
// (a stream names them in its first event).
type Turn struct {
	// ID is the run's id, 32 hex characters.
	ID string
	// Agent is the agent that runs.
	Agent gateway.Agent
	// SessionKey is the session the turn belongs to ("" for none).
	SessionKey string

	run     *Run
	owner   string          // the session's user: keys are scoped per owner
	asked   string          // the session's new user message
	aborted context.Context // done when the session turn is aborted (nil: the caller's ctx carries it)
	release context.CancelFunc
	unlock  func() // releases the cluster-wide session turn lock (nil: none taken)
}

// TurnResult is a finished turn.
type TurnResult struct {
	Result
	RunID      string
	Agent      gateway.Agent
	SessionKey string
}

// Turn runs one turn: Begin, then RunTurn with req.OnDelta. ctx bounds
// the whole turn; it should carry no deadline shorter than the agent's
// limit. Errors: Begin's and RunTurn's.
func (rt *Runtime) Turn(ctx context.Context, p gateway.Principal, req TurnRequest) (TurnResult, error) {
	t, err := rt.Begin(ctx, p, req)
	if err != nil {
		return TurnResult{}, err
	}
	return rt.RunTurn(ctx, t, req.OnDelta)
}

// Begin resolves the agent, decides whether p may run it, and only then
// begins the session turn (if any) and prepares the run. A refused
// caller gets ErrAgentNotFound, having caused no tool resolution, no MCP
// connection and no provider call. Messages larger than the Limits are
// refused first, with ErrMessageTooLarge. Other errors: ErrAgentDisabled,
// ErrProviderDisabled, gateway.ErrInvalid (a bad session key), the
// registry's. A begun Turn must be run, once, with RunTurn, which ends
// its session turn.
func (rt *Runtime) Begin(ctx context.Context, p gateway.Principal, req TurnRequest) (*Turn, error) {
	if err := rt.checkSize(req.Messages); err != nil {
		if req.Queued != nil { // queued by the transport: free the session's queue, asking nothing
			if _, werr := req.Queued(ctx); werr == nil {
				rt.endTurn(ctx, &Turn{SessionKey: req.SessionKey}, Result{}, err)
			}
		}
		return nil, err
	}
	if req.SessionKey == "" && req.Queued == nil {
		run := req.run(p, req.Messages)
		pl, err := rt.plan(ctx, req.Agent, p, true, run)
		if err != nil {
			return nil, err
		}
		rn, err := rt.prepare(ctx, pl, run)
		if err != nil {
			return nil, err
		}
		return &Turn{ID: rn.ID, Agent: rn.Agent, run: rn}, nil
	}
	return rt.beginSession(ctx, p, req)
}

// RunTurn executes t within its agent's time limit and records it: the
// trace (with its session key) and the session's turn, durable, even
// when ctx has ended. onDelta, when not nil, gets streamed content.
// Errors: a *TimeoutError (ErrAgentTimeout), a *ProviderError
// (ErrProvider), onDelta's, or ctx's (the client went away, or the
// session turn was aborted).
func (rt *Runtime) RunTurn(ctx context.Context, t *Turn, onDelta func(string) error) (TurnResult, error) {
	if t.aborted != nil {
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(ctx)
		defer cancel()
		defer context.AfterFunc(t.aborted, cancel)()
	}
	res, err := rt.execute(ctx, t.run, onDelta)
	rt.endTurn(ctx, t, res, err)
	return TurnResult{Result: res, RunID: t.ID, Agent: t.Agent, SessionKey: t.SessionKey}, err
}

// resolve finds agent ref (the default agent of p's user when "") and
// decides whether p may run it, reading nothing else about it: the
// check before a session turn is queued.
func (rt *Runtime) resolve(ctx context.Context, p gateway.Principal, ref string) (gateway.Agent, error) {
	pl, err := rt.agents.PlanRun(ctx, gateway.PlanRequest{Agent: ref, For: p, AnyStatus: true, Bare: true})
	if err != nil {
		return gateway.Agent{}, notFound(err, cmp.Or(ref, "default agent"))
	}
	return pl.Agent, nil
}

// ready refuses an agent that is not active (unless anyStatus) or whose
// provider is disabled.
func ready(a gateway.Agent, prov gateway.Provider, anyStatus bool) error {
	switch {
	case a.Status != gateway.AgentActive && !anyStatus:
		return ErrAgentDisabled
	case !prov.Enabled:
		return ErrProviderDisabled
	}
	return nil
}

// notFound turns the registry's not-found into ErrAgentNotFound.
func notFound(err error, ref string) error {
	if errors.Is(err, gateway.ErrNotFound) {
		return fmt.Errorf("%w: %q", ErrAgentNotFound, ref)
	}
	return fmt.Errorf("resolve agent %q: %w", ref, err)
}

// run is the Request of a turn of p.
func (req TurnRequest) run(p gateway.Principal, msgs []Message) Request {
	return Request{User: p.User, Endpoint: req.Endpoint, Channel: req.Channel, SessionKey: req.SessionKey,
		Messages: msgs, System: req.System, AnyStatus: req.AnyStatus, KeyID: p.KeyID}
}
