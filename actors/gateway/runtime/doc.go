// Package runtime runs the gateway's agents: it resolves an agent and its
// provider through the gateway's registry, calls the provider (the
// offline echo provider, or any OpenAI-compatible endpoint over net/http)
// within the agent's time limit, passes streamed content on as it
// arrives, and records every run (trace and usage) whatever its outcome.
// It knows no transport: failures are the domain errors of errors.go,
// which each transport maps once (httpapi/gateway: the HTTP envelope and
// the SSE error event).
//
// # Usage
//
//	rt := runtime.New(gw, gw) // *gateway.Gateway: Agents and Recorder
//	defer rt.Close(ctx) // after the listeners drained
//	rn, err := rt.Prepare(ctx, runtime.Request{Agent: "default", User: "alice",
//		Endpoint: "chat.completions", Messages: []runtime.Message{{Role: "user", Content: "hi"}}})
//	if err != nil {
//		return err // ErrAgentNotFound, ErrAgentDisabled, ErrProviderDisabled, ...
//	}
//	res, err := rt.Execute(context.WithoutCancel(ctx), rn, onDelta) // *TimeoutError, *ProviderError
//
// # Concurrency and ownership
//
// A Runtime is safe for concurrent use; a Run belongs to one caller and
// is executed once. Execute calls onDelta on the provider's goroutine (the
// caller's, for the echo provider), one call at a time. The provider's
// credential is opened in Prepare and held only by the Run. Recording a
// run does not wait for the WAL: it is durable within one group commit.
package runtime
