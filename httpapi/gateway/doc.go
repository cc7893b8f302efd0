// Package gateway is the agent gateway's HTTP API (seed 001, the second
// listener, default 127.0.0.1:18790): gateway API keys, LLM providers,
// agents, an OpenAI-compatible chat completion, a responses-style run and
// the OpenAPI docs. It is transport only: decode, authenticate, call,
// encode, stream. The state lives in gatehouse/actors/gateway, and so
// does the policy (gateway.Principal: may run, read, manage); every agent
// run is a turn of gatehouse/actors/gateway/agentrun (Begin/RunTurn or
// Turn), the webhook channel is gatehouse/actors/gateway/webhook and
// workspace files gatehouse/actors/gateway/workspace, all built by
// gatehouse/actors/gateway/app; the fasthttp plumbing both listeners
// share is in gatehouse/httpapi/listener.
//
// # Usage
//
//	a, err := app.New(app.DefaultConfig(), gw, lg) // the application services, owned by the caller
//	srv, err := gateway.New(gateway.DefaultConfig(), gateway.DepsOf(gw, a), lg, reg, reg)
//	if err != nil {
//		return err
//	}
//	go srv.Serve(ln)
//	...
//	srv.Shutdown(ctx) // drains requests and streams
//	a.Close(ctx)      // then the runtime: summons, webhooks, provider and MCP connections
//
// # One route table
//
// Every endpoint is one line of routes.go:
//
//	{Method: post, Path: "/v1/agents/{id}/wake", RPC: "agents.wake", Scope: write, NeedUser: true,
//		Tag: "agents", Summary: "Run the agent once on a message", Op: op(s.wake)},
//
// and an operation that knows nothing of HTTP:
//
//	type wakeReq struct {
//		ID      string `path:"id" json:"-"` // or query:"name", header:"Name"; never the body
//		Message string `json:"message"` // every untagged field is the JSON body
//	}
//	func (s *Server) wake(ctx context.Context, c Caller, req wakeReq) (wakeResp, error)
//
// An upload takes its body raw instead, in one field:
//
//	Data []byte `body:"application/zip" json:"-"` // the documented media type
//
// op builds the handler: the router, the OpenAPI document (schemas from
// the input and output types) and Dispatch, the seam of the WebSocket RPC,
// are generated from the table, and HTTP and Dispatch run the same checks
// (admit: rate limit, scope, X-Gateway-User-Id). An operation returns its
// output as a value: a struct (JSON), None (the route's status, no body),
// Body (bytes with a content type) or Streaming[T] (T, or Events sent
// through a Stream: Server-Sent Events today, WebSocket frames next).
// Operations return errors, never write them: domain errors of
// actors/gateway and actors/gateway/agentrun, or the *apiError values of
// errors.go. classify maps any error once; each transport has one mapper
// over it (writeError: the HTTP envelope; sseStream.Error: a stream's
// error event), and the mapper that answers an unexpected error logs it,
// once.
//
// # Concurrency and ownership
//
// A Server is safe for concurrent use. Control-plane requests get
// context.WithTimeout(context.Background(), Config.RequestTimeout); an
// agent run is bounded by its agent's timeout_seconds instead (the
// operation detaches its context with runContext), and a streamed run by
// the client too: the Events' context ends at the first failed write. No
// *fasthttp.RequestCtx outlives its handler: the HTTP source hands
// operations copies, and a stream keeps only copies of the method and
// path. The services (Deps) are small interfaces declared where they are
// used; the actor-backed *gateway.Gateway and the app's services satisfy
// them. An operation turns its Caller into a gateway.Principal
// (Caller.principal) and leaves every policy decision to the domain.
package gateway
