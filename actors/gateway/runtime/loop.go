package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"gatehouse/actors/gateway"
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

// Toolbox lists the tools an agent has when it runs for user: its custom
// tools and the tools of the MCP servers granted to it or to user.
type Toolbox interface {
	Tools(ctx context.Context, a gateway.Agent, user string) ([]Tool, error)
}

// ToolCall is a call the model asked for (OpenAI tool_calls).
type ToolCall struct {
	ID       string       `json:"id"`
	Type     string       `json:"type"`
	Function ToolFunction `json:"function"`
}

// ToolFunction names the function and carries its JSON arguments.
type ToolFunction struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// toolSpec is a tool as the provider is told about it.
type toolSpec struct {
	Type     string       `json:"type"`
	Function toolSpecFunc `json:"function"`
}

type toolSpecFunc struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters"`
}

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
		req.Tools = append(req.Tools, toolSpec{Type: "function", Function: toolSpecFunc{Name: t.Name, Description: t.Description, Parameters: t.Parameters}})
	}
	limit := rn.Agent.MaxToolIterations
	if limit <= 0 {
		limit = gateway.DefaultMaxToolIterations
	}
	for round := 0; ; round++ {
		start, t0 := rt.now(), time.Now()
		res, err := rn.call(ctx, req, onDelta)
		llm := gateway.Span{
			ID: spanID(), Name: "llm.call " + req.Model, Kind: gateway.SpanLLM, Model: req.Model, Provider: rn.provider,
			StartedAt: start.UTC(), DurationMs: time.Since(t0).Milliseconds(), PromptTokens: res.PromptTokens,
			CompletionTokens: res.CompletionTokens, Status: gateway.RunOK,
			InputPreview: rn.redact.preview(lastContent(req.Messages)), OutputPreview: rn.redact.preview(res.Content),
		}
		total.PromptTokens += res.PromptTokens
		total.CompletionTokens += res.CompletionTokens
		if err != nil {
			llm.Status, llm.Error = gateway.RunFailed, rn.redact.preview(err.Error())
			spans = append(spans, llm)
			return total, spans, err
		}
		if len(res.ToolCalls) == 0 {
			spans = append(spans, llm)
			total.Content, total.FinishReason = res.Content, res.FinishReason
			return total, spans, nil
		}
		llm.OutputPreview = rn.redact.preview(callNames(res.ToolCalls))
		spans = append(spans, llm)
		if round >= limit {
			return total, spans, &ToolLimitError{Iterations: limit}
		}
		req.Messages = append(req.Messages, Message{Role: "assistant", Content: res.Content, ToolCalls: res.ToolCalls})
		for _, tc := range res.ToolCalls {
			out, sp := rt.runTool(ctx, rn, byName[tc.Function.Name], tc, llm.ID)
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
