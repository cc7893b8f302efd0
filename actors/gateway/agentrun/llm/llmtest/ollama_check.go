package llmtest

import (
	"encoding/json"
	"fmt"
	"slices"
)

// ollamaRequest is an /api/chat request as the stub reads it.
type ollamaRequest struct {
	Model    string `json:"model"`
	Messages []struct {
		Role      string          `json:"role"`
		Content   json.RawMessage `json:"content"`
		ToolCalls []struct {
			Function struct {
				Name      string          `json:"name"`
				Arguments json.RawMessage `json:"arguments"`
			} `json:"function"`
		} `json:"tool_calls"`
		ToolName string `json:"tool_name"`
	} `json:"messages"`
	Tools []struct {
		Type     string `json:"type"`
		Function struct {
			Name       string          `json:"name"`
			Parameters json.RawMessage `json:"parameters"`
		} `json:"function"`
	} `json:"tools"`
	Stream  bool `json:"stream"`
	Options *struct {
		NumPredict *int `json:"num_predict"`
	} `json:"options"`
}

func (r *ollamaRequest) lastUser() string {
	for i := len(r.Messages) - 1; i >= 0; i-- {
		if m := r.Messages[i]; m.Role == "user" {
			var s string
			_ = json.Unmarshal(m.Content, &s)
			return s
		}
	}
	return ""
}

// checkOllamaRequest decodes body and lists what is wrong with it.
func checkOllamaRequest(body []byte) (*ollamaRequest, []string) {
	var req ollamaRequest
	var fields map[string]json.RawMessage
	if json.Unmarshal(body, &req) != nil || json.Unmarshal(body, &fields) != nil {
		return nil, []string{"request body is not a JSON object"}
	}
	var bad []string
	add := func(format string, args ...any) { bad = append(bad, fmt.Sprintf(format, args...)) }
	if s, ok := fields["stream"]; !ok || (string(s) != "true" && string(s) != "false") {
		add(`"stream" must be set to true or false (Ollama streams when it is absent)`)
	}
	if req.Model == "" {
		add("no model")
	}
	var calls []string // tool names called by the assistant message before
	for i, m := range req.Messages {
		if len(m.Content) > 0 && !oaIsString(m.Content) {
			add("messages[%d]: content must be a string", i)
		}
		switch m.Role {
		case "system", "user":
			calls = nil
		case "assistant":
			calls = nil
			for j, c := range m.ToolCalls {
				if c.Function.Name == "" || !oaIsObject(c.Function.Arguments) {
					add("messages[%d].tool_calls[%d]: want a name and arguments as a JSON object, got %s", i, j, c.Function.Arguments)
				}
				calls = append(calls, c.Function.Name)
			}
		case "tool":
			switch {
			case len(calls) == 0:
				add("messages[%d]: a tool message must follow an assistant message with tool_calls", i)
			case m.ToolName == "":
				add("messages[%d]: a tool message without tool_name", i)
			case !slices.Contains(calls, m.ToolName):
				add("messages[%d]: tool_name %q names no call of the assistant message before (%v)", i, m.ToolName, calls)
			}
		default:
			add("messages[%d]: unknown role %q", i, m.Role)
		}
	}
	for i, t := range req.Tools {
		if t.Type != "function" || t.Function.Name == "" {
			add("tools[%d]: want type function and a name", i)
		}
		if len(t.Function.Parameters) > 0 && !oaIsObject(t.Function.Parameters) {
			add("tools[%d]: parameters must be a JSON Schema object", i)
		}
	}
	if req.Options != nil && req.Options.NumPredict != nil && *req.Options.NumPredict == 0 {
		add("options.num_predict 0 asks for no tokens")
	}
	return &req, bad
}
