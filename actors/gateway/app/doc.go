// Package app is the agent gateway's application layer below every
// transport (HTTP, WebSocket, webhooks): it builds, over the gateway's
// state (*gateway.Gateway), the services the transports call, and owns
// their lifecycle. Transports decode, authenticate, call, encode and
// stream; the turn sequence, the policy (gateway.Principal), summoning,
// webhook delivery and workspace files live below them.
//
// # Usage
//
//	a, err := app.New(app.DefaultConfig(), g, lg) // g: the started *gateway.Gateway
//	if err != nil {
//		return err
//	}
//	deps := gwapi.DepsOf(g, a)
//	// ... serve, then shut every listener down ...
//	err = a.Close(ctx) // after the listeners drained
//
// # Concurrency and ownership
//
// Every service is safe for concurrent use. The App owns the background
// work they start (summons, async webhook turns and their callbacks) and
// the runtime's connections (providers, MCP servers); Close ends them in
// order: webhooks first (their turns run on the runtime), then the
// runtime. Whoever built the App closes it, once, after the transports
// stopped calling it.
package app
