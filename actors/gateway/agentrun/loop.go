package agentrun

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"gatehouse/actors/gateway"
	"gatehouse/actors/gateway/agentrun/llm"
)

// Tool is one tool a run may call: a custom tool, an MCP server's tool, or
// a built-in (delegate, memory_search, memory_save).
type Tool struct {
	// Name is unique within the run (the model calls it by name).
	Name string
	// Aliases are other names tools.invoke accepts (an MCP tool's
	// "server.tool").
	Aliases     []string
	Description string
	// Parameters is the JSON Schema of the arguments (an object schema).
	Parameters json.RawMessage
	// Kind is the span type of its calls: gateway.SpanTool, or
	// gateway.SpanDelegation for delegate.
	Kind string
	// Secrets are values to mask in the call's trace (its env, headers).
	Secrets []string
	// Call runs the tool. The output goes back to the model; an error is
	// the tool's failure, reported to the model as such (the run goes on).
	Call func(ctx context.Context, args json.RawMessage) (string, error)
}

// Toolbox makes the tools a run's plan names runnable: the agent's
// custom tools and the tools of the MCP servers granted to it or to its
// user (gateway.RunPlan.Tools, read with the rest of the plan).
type Toolbox interface {
	Tools(ctx context.Context, a gateway.Agent, planned gateway.RunTools) ([]Tool, error)
}

// toolCloser is an optional capability of a Toolbox (package toolbox's
// Box): Close closes the connections its tools hold (MCP servers), at
// the Runtime's Close.
type toolCloser interface{ Close() }

// MaxToolOutput is how much of a tool's output goes back to the model.
const MaxToolOutput = 16 << 10

// ErrToolLimit: the model kept calling tools past the agent's
// max_tool_iterations without answering.
var ErrToolLimit = errors.New("runtime: the agent called tools max_tool_iterations times without answering")

// ToolLimitError carries the limit that was reached.
type ToolLimitError struct{ Iterations int }

func (e *ToolLimitError) Error() string {
	return fmt.Sprintf("%v (%d)", ErrToolLimit, e.Iterations)
}

// Is makes errors.Is(err, ErrToolLimit) true.
func (e *ToolLimitError) Is(target error) bool { return target == ErrToolLimit }

// loop runs the model, and the tools it calls, until it answers: up to
// the agent's max_tool_iterations rounds of tool calls. It returns the
// final result with the tokens of every call, and the spans of the run.
func (rt *Runtime) loop(ctx context.Context, rn *Run, onDelta func(string) error) (Result, []gateway.Span, error) {
	var spans []gateway.Span
	var total Result
	req := rn.req
	byName := make(map[string]*Tool, len(rn.tools))
	for i := range rn.tools {
		t := &rn.tools[i]
		byName[t.Name] = t
		req.Tools = append(req.Tools, llm.ToolSpec{Type: "function", Function: llm.ToolSpecFunc{Name: t.Name, Description: t.Description, Parameters: t.Parameters}})
	}
	req.ToolsJSON = rt.toolsJSON.encoded(rn.Agent.ID, rn.user, req.Tools)
	limit := rn.Agent.MaxToolIterations
	if limit <= 0 {
		limit = gateway.DefaultMaxToolIterations
	}
	for round := 0; ; round++ {
		c, err := rt.complete(ctx, rn, req, onDelta)
		spans = append(spans, c.spans...)
		for _, sp := range c.spans {
			total.PromptTokens += sp.PromptTokens
			total.CompletionTokens += sp.CompletionTokens
			total.CacheReadTokens += sp.CacheReadTokens
			total.CacheWriteTokens += sp.CacheWriteTokens
			total.ReasoningTokens += sp.ReasoningTokens
		}
		if err != nil {
			return total, spans, err
		}
		res := c.res
		rn.provider, rn.provType, rn.model = c.answered.p.Name, c.answered.p.ProviderType, c.answered.model
		llmSpan := &spans[len(spans)-1]
		if len(res.ToolCalls) == 0 {
			total.Content, total.FinishReason = res.Content, res.FinishReason
			return total, spans, nil
		}
		llmSpan.OutputPreview = rn.redact.preview(callNames(res.ToolCalls))
		parent := llmSpan.ID
		if round >= limit {
			return total, spans, &ToolLimitError{Iterations: limit}
		}
		if rn.thinkingBy != c.answered.p.ID {
			// Another provider's reasoning blocks (and signatures) mean
			// nothing to this one, and some APIs refuse them.
			req.Messages = withoutThinking(req.Messages)
			rn.thinkingBy = c.answered.p.ID
		}
		req.Messages = append(req.Messages, Message{Role: "assistant", Content: res.Content, ToolCalls: res.ToolCalls, Thinking: res.Thinking})
		for _, tc := range res.ToolCalls {
			out, sp := rt.runTool(ctx, rn, byName[tc.Function.Name], tc, parent)
			spans = append(spans, sp)
			req.Messages = append(req.Messages, Message{Role: "tool", ToolCallID: tc.ID, Content: out})
		}
	}
}

// runTool runs one tool call and returns what goes back to the model and
// its span.
func (rt *Runtime) runTool(ctx context.Context, rn *Run, t *Tool, tc ToolCall, parent string) (string, gateway.Span) {
	sp := gateway.Span{ID: spanID(), ParentID: parent, Name: "tool " + tc.Function.Name, Kind: gateway.SpanTool, Status: gateway.RunOK}
	if t != nil && t.Kind != "" {
		sp.Kind = t.Kind
	}
	redact := rn.redact
	if t != nil && len(t.Secrets) > 0 {
		redact = redact.with(t.Secrets...)
	}
	sp.InputPreview = redact.preview(tc.Function.Arguments)
	start, t0 := rt.now(), time.Now()
	var out string
	var err error
	switch {
	case t == nil:
		err = fmt.Errorf("no tool named %q", tc.Function.Name)
	case tc.Function.Arguments != "" && !json.Valid([]byte(tc.Function.Arguments)):
		err = errors.New("arguments are not valid JSON")
	default:
		args := json.RawMessage(tc.Function.Arguments)
		if len(args) == 0 {
			args = json.RawMessage("{}")
		}
		out, err = t.Call(ctx, args)
	}
	sp.StartedAt, sp.DurationMs = start.UTC(), time.Since(t0).Milliseconds()
	if err != nil {
		sp.Status, sp.Error = gateway.RunFailed, redact.preview(err.Error())
		msg := "error: " + err.Error()
		if out != "" {
			msg += "\n" + out
		}
		out = msg
	}
	sp.OutputPreview = redact.preview(fmt.Sprintf("%d bytes: %s", len(out), head(out, PreviewRunes*utf8.UTFMax+redact.margin)))
	if len(out) > MaxToolOutput {
		out = out[:MaxToolOutput] + "\n[output truncated]"
	}
	return out, sp
}

func callNames(calls []ToolCall) string {
	names := make([]string, len(calls))
	for i, c := range calls {
		names[i] = c.Function.Name
	}
	return "tool calls: " + strings.Join(names, ", ")
}

// lastContent is the content of the last message (a user message or a
// tool result).
func lastContent(msgs []Message) string {
	if len(msgs) == 0 {
		return ""
	}
	return msgs[len(msgs)-1].Content
}

// withoutThinking is msgs without reasoning blocks: msgs itself when none
// has any, else a copy.
func withoutThinking(msgs []Message) []Message {
	i := slices.IndexFunc(msgs, func(m Message) bool { return len(m.Thinking) > 0 })
	if i < 0 {
		return msgs
	}
	out := slices.Clone(msgs)
	for j := i; j < len(out); j++ {
		out[j].Thinking = nil
	}
	return out
}
