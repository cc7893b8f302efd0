// Package agentrun runs the gateway's agents: it resolves an agent and its
// provider through the gateway's registry, calls the provider (the
// offline echo provider, or any OpenAI-compatible endpoint over net/http)
// within the agent's time limit, passes streamed content on as it
// arrives, and records every run (trace and usage) whatever its outcome.
// It knows no transport: failures are the domain errors of errors.go,
// which each transport maps once (httpapi/gateway: the HTTP envelope and
// the SSE error event).
//
// Every run a caller asks for is a turn, one operation whatever the
// transport (turn.go): resolve the agent (the default agent when none is
// named), decide policy (gateway.Principal.MayRun) before anything else
// about the agent is read, begin the session turn if there is a session,
// prepare (system prompt, USER.md, skills, tools, MCP), execute the tool
// loop, record (the trace, which carries the session key, and the
// session's turn). Summoning and regenerating (summon.go) are turns too.
//
// # How a turn plans
//
// A turn plans from one read of the registry's published view
// (Agents.PlanRun, gateway.Gateway.PlanRun): the agent (the user's
// default agent when none is named), its provider and fallbacks, the
// user's USER.md, the agent's skills, its custom tools and its MCP
// access come back together as a gateway.RunPlan, so that a change made
// meanwhile (the agent moved to another provider, a new USER.md, a tool
// added) is in all of the plan or in none of it. The policy
// (gateway.Principal.MayRun) is decided inside that read, on the same
// view, before anything but the agent and its provider is read; the
// runtime then checks that the agent can run (ErrAgentDisabled,
// ErrProviderDisabled) and builds the run from the plan alone: the
// targets (provider, then enabled fallbacks), the preamble, and the
// tools, which the Toolbox makes runnable from the plan (it connects to
// the MCP servers; it reads nothing of the registry). A session turn
// reads the view once more before it is queued, to decide policy on the
// named agent, and plans once the turn has begun, on the session's agent.
//
// # Usage
//
//	rt, err := agentrun.New(agentrun.Deps{ // the required ones; package app passes the rest
//		Agents: gw, Recorder: gw, Sessions: gw, Prompts: gw, Now: gw.Now}) // gw: *gateway.Gateway
//	if err != nil { … }                        // a required collaborator missing
//	_ = rt.SetLimits(agentrun.DefaultLimits()) // optional, before the first run
//	defer rt.Close(ctx)                        // after the listeners drained
//	res, err := rt.Turn(ctx, gateway.Principal{User: "alice"}, agentrun.TurnRequest{
//		Agent: "default", Endpoint: "chat.completions", Channel: "http",
//		Messages: []agentrun.Message{{Role: "user", Content: "hi"}}})
//	// ErrMessageTooLarge, ErrAgentNotFound (also for a caller who may not run it),
//	// ErrAgentDisabled, ErrProviderDisabled, *TimeoutError, *ProviderError
//
// A stream that must name the run before it runs splits the turn: Begin
// (errors before the stream starts), then RunTurn with its onDelta.
//
// # Bounds
//
// A run's cost follows what it keeps, not what it is sent (limits.go):
// Begin refuses more than Limits.MaxMessageBytes of message text
// (ErrMessageTooLarge, which wraps gateway.ErrTooLarge) before it reads
// anything; a provider's answer is read up to Limits.MaxAnswerBytes and
// no further (a *ProviderError); a trace preview redacts only the 200
// characters it keeps and a margin (redact.go). A run ends with its
// context: a transport cancels it when its client goes away.
//
// # Concurrency and ownership
//
// A Runtime is safe for concurrent use; a Run belongs to one caller and
// is executed once; so is a Turn. A run calls onDelta on the provider's
// goroutine (the caller's, for the echo provider), one call at a time.
// The provider's credential is opened when the run is prepared and held
// only by the Run. The Runtime owns its background runs (summons): Close
// ends them. Recording a run does not wait for the WAL: it is durable
// within one group commit.
package agentrun
