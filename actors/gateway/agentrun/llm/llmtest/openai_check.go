package llmtest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
)

// openAIRequest is a Chat Completions request as the stub reads it.
type openAIRequest struct {
	Model    string `json:"model"`
	Messages []struct {
		Role       string          `json:"role"`
		Content    json.RawMessage `json:"content"`
		ToolCalls  []openAICall    `json:"tool_calls"`
		ToolCallID string          `json:"tool_call_id"`
	} `json:"messages"`
	Tools []struct {
		Type     string `json:"type"`
		Function struct {
			Name       string          `json:"name"`
			Parameters json.RawMessage `json:"parameters"`
		} `json:"function"`
	} `json:"tools"`
	Stream        *bool `json:"stream"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	MaxTokens *int `json:"max_tokens"`
}

type openAICall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	} `json:"function"`
}

// oaToolName is the pattern OpenAI requires of a function's name.
var oaToolName = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// lastUser is the text of the last user message.
func (r *openAIRequest) lastUser() string {
	for i := len(r.Messages) - 1; i >= 0; i-- {
		if m := r.Messages[i]; m.Role == "user" {
			var s string
			_ = json.Unmarshal(m.Content, &s)
			return s
		}
	}
	return ""
}

// answerModel is the model an answer names.
func (r *openAIRequest) answerModel() string {
	if r.Model == "" {
		return "gpt-4o-mini-2024-07-18" // Azure: the deployment's model
	}
	return r.Model
}

// checkOpenAIRequest decodes body and lists what the API would refuse
// in it; deploymentPath says the model is in the path (Azure), not the
// body.
func checkOpenAIRequest(body []byte, deploymentPath bool) (*openAIRequest, []string) {
	var req openAIRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, []string{fmt.Sprintf("request body is not JSON: %v", err)}
	}
	var bad []string
	add := func(format string, args ...any) { bad = append(bad, fmt.Sprintf(format, args...)) }
	if req.Model == "" && !deploymentPath {
		add("no model")
	}
	if len(req.Messages) == 0 {
		add("no messages")
	}
	bad = append(bad, checkOpenAIMessages(&req)...)
	for i, t := range req.Tools {
		if t.Type != "function" || !oaToolName.MatchString(t.Function.Name) {
			add("tools[%d]: want type function and a name matching %s", i, oaToolName)
		}
		if len(t.Function.Parameters) > 0 && !oaIsObject(t.Function.Parameters) {
			add("tools[%d]: parameters must be a JSON Schema object", i)
		}
	}
	if req.StreamOptions != nil && (req.Stream == nil || !*req.Stream) {
		add("stream_options is only allowed when stream is true")
	}
	if req.MaxTokens != nil && *req.MaxTokens < 1 {
		add("max_tokens must be at least 1")
	}
	return &req, bad
}

// checkOpenAIMessages lists what is wrong with req's messages: roles,
// contents, and tool calls each answered, right after their assistant
// message, by a tool message with the call's id.
func checkOpenAIMessages(req *openAIRequest) []string {
	var bad []string
	add := func(format string, args ...any) { bad = append(bad, fmt.Sprintf(format, args...)) }
	var pending []string // the previous assistant message's unanswered call ids
	afterCalls := false  // the previous messages are tool calls and their results
	for i, m := range req.Messages {
		if m.Role != "tool" && len(pending) > 0 {
			add("messages[%d]: tool calls %v of the assistant message before are not answered", i, pending)
			pending = nil
		}
		if m.Role != "tool" {
			afterCalls = false
		}
		switch m.Role {
		case "system", "developer", "user":
			if !oaIsString(m.Content) && !oaIsArray(m.Content) {
				add("messages[%d] (%s): content must be a string or an array of parts", i, m.Role)
			}
		case "assistant":
			if len(m.ToolCalls) == 0 && !oaIsString(m.Content) && !oaIsArray(m.Content) {
				add("messages[%d] (assistant): content must be given without tool_calls", i)
			}
			for j, c := range m.ToolCalls {
				bad = append(bad, checkOpenAICall(i, j, c)...)
				pending = append(pending, c.ID)
			}
			afterCalls = len(m.ToolCalls) > 0
		case "tool":
			if !oaIsString(m.Content) && !oaIsArray(m.Content) {
				add("messages[%d] (tool): content must be a string", i)
			}
			k := slices.Index(pending, m.ToolCallID)
			switch {
			case !afterCalls:
				add("messages[%d]: a tool message must answer a preceding message with tool_calls", i)
			case k < 0:
				add("messages[%d]: tool_call_id %q answers no call of the assistant message before", i, m.ToolCallID)
			default:
				pending = append(pending[:k], pending[k+1:]...)
			}
		default:
			add("messages[%d]: unknown role %q", i, m.Role)
		}
	}
	if len(pending) > 0 {
		add("tool calls %v of the last assistant message are not answered", pending)
	}
	return bad
}

// checkOpenAICall lists what is wrong with messages[i].tool_calls[j].
func checkOpenAICall(i, j int, c openAICall) []string {
	var bad []string
	if c.ID == "" || c.Type != "function" || c.Function.Name == "" {
		bad = append(bad, fmt.Sprintf("messages[%d].tool_calls[%d]: want an id, type function and a name", i, j))
	}
	var args string
	if !oaIsString(c.Function.Arguments) || json.Unmarshal(c.Function.Arguments, &args) != nil {
		bad = append(bad, fmt.Sprintf("messages[%d].tool_calls[%d]: arguments must be a JSON string, got %s", i, j, c.Function.Arguments))
	} else if !json.Valid([]byte(args)) {
		bad = append(bad, fmt.Sprintf("messages[%d].tool_calls[%d]: arguments %q are not JSON", i, j, args))
	}
	return bad
}

func oaIsString(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) > 0 && raw[0] == '"'
}

func oaIsArray(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) > 0 && raw[0] == '['
}

func oaIsObject(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) > 0 && raw[0] == '{'
}
