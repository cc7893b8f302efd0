package agentrun

import (
	"net/http"
	"time"

	"gatehouse/actors/gateway/agentrun/llm"
)

// The runtime's side of the provider calls: the message types (package
// llm's, which every provider client converts to its wire format) and
// the one HTTP client every provider client shares. It uses net/http
// rather than fasthttp: a streamed answer is read incrementally, and
// cancelling the request's context (client gone, agent time limit)
// aborts the upstream exchange at once, which fasthttp's client cannot
// do mid-body; the official provider SDKs take an *http.Client too.

// Message is one chat message sent to a provider: a system, user or
// assistant message, an assistant's tool calls, or a tool's result.
type Message = llm.Message

// ToolCall is a call the model asked for (OpenAI tool_calls).
type ToolCall = llm.ToolCall

// ToolFunction names the function and carries its JSON arguments.
type ToolFunction = llm.ToolFunction

// Result is a finished completion: the answer, or the tool calls the
// model asks for before it answers, with its token counts (see
// llm.Result for their convention).
type Result = llm.Result

// Upstream pool. The gateway bounds nothing per provider: its calls in
// flight to one provider are its chat requests in flight, bounded only by
// the listeners' connections (server.max_conns). A connection is kept
// idle for reuse up to maxIdlePerHost per provider host (maxIdle in all),
// so that up to that many calls in flight never open a new connection in
// steady state; a burst beyond it opens more and closes the surplus when
// it ends. Idle connections close after idleTimeout. The provider
// clients drain an answer's end before closing it, so that the
// connection goes back to the pool.
const (
	maxIdlePerHost = 256
	maxIdle        = 1024
	idleTimeout    = 90 * time.Second
)

func newHTTPClient() *http.Client {
	tr := &http.Transport{
		Proxy:               nil,
		MaxIdleConns:        maxIdle,
		MaxIdleConnsPerHost: maxIdlePerHost,
		IdleConnTimeout:     idleTimeout,
		ForceAttemptHTTP2:   false,
	}
	return &http.Client{Transport: tr}
}
