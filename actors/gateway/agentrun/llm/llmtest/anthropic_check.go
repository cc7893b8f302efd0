package llmtest

// What the Anthropic stub checks in a POST /v1/messages body: the rules
// https://docs.anthropic.com/en/api/messages, .../build-with-claude/
// tool-use, .../extended-thinking and .../prompt-caching state, each a
// 400 invalid_request_error from the API.

import (
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strings"
)

// anthropicFields are the top-level fields the API accepts (an unknown
// one is refused: "Extra inputs are not permitted").
var anthropicFields = map[string]bool{
	"model": true, "messages": true, "max_tokens": true, "system": true, "metadata": true,
	"stop_sequences": true, "stream": true, "temperature": true, "top_k": true, "top_p": true,
	"tools": true, "tool_choice": true, "thinking": true, "service_tier": true, "container": true,
	"mcp_servers": true, "context_management": true, "cache_control": true,
}

var (
	anthropicToolName = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,128}$`)
	anthropicToolID   = regexp.MustCompile(`^[a-zA-Z0-9_-]+$`)
)

// decode reads a messages body and lists what breaks the API's rules.
func (a *Anthropic) decode(body []byte) (AnthropicRequest, []string) {
	var req AnthropicRequest
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(body, &raw); err != nil {
		return req, []string{"body is not a JSON object: " + err.Error()}
	}
	var p anthropicProblems
	for k := range raw {
		if !anthropicFields[k] {
			p.add("%s: Extra inputs are not permitted", k)
		}
	}
	var v struct {
		Model     string             `json:"model"`
		MaxTokens *int               `json:"max_tokens"`
		Stream    bool               `json:"stream"`
		Thinking  *AnthropicThinking `json:"thinking"`
		Messages  []AnthropicMessage `json:"messages"`
		Tools     []AnthropicTool    `json:"tools"`
		System    json.RawMessage    `json:"system"`
	}
	if err := json.Unmarshal(body, &v); err != nil {
		return req, []string{"body does not decode: " + err.Error()}
	}
	req.Model, req.Stream, req.Thinking, req.Messages, req.Tools = v.Model, v.Stream, v.Thinking, v.Messages, v.Tools
	if v.Model == "" {
		p.add("model: Field required")
	}
	if v.MaxTokens == nil {
		p.add("max_tokens: Field required")
	} else {
		req.MaxTokens = *v.MaxTokens
		if req.MaxTokens < 1 {
			p.add("max_tokens: must be at least 1")
		}
	}
	if t := v.Thinking; t != nil {
		switch {
		case t.Type == "disabled":
		case t.Type != "enabled":
			p.add("thinking.type: %q is not enabled or disabled", t.Type)
		case t.BudgetTokens < 1024:
			p.add("thinking.budget_tokens: must be >= 1024")
		case t.BudgetTokens >= req.MaxTokens:
			p.add("max_tokens must be greater than thinking.budget_tokens")
		}
	}
	req.System = p.system(v.System)
	a.checkMessages(&p, req)
	anthropicCheckTools(&p, req.Tools)
	var generic any
	_ = json.Unmarshal(body, &generic)
	anthropicCachePaths(&p, generic, "", &req.CacheBreakpoints)
	if n := len(req.CacheBreakpoints); n > 4 {
		p.add("A maximum of 4 blocks with cache_control may be provided. Found %d.", n)
	}
	return req, p
}

// anthropicProblems collects rule violations.
type anthropicProblems []string

func (p *anthropicProblems) add(format string, args ...any) {
	*p = append(*p, fmt.Sprintf(format, args...))
}

// system decodes system: a string or text blocks.
func (p *anthropicProblems) system(raw json.RawMessage) []AnthropicBlock {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return []AnthropicBlock{{Type: "text", Text: s}}
	}
	var blocks []AnthropicBlock
	if err := json.Unmarshal(raw, &blocks); err != nil {
		p.add("system: must be a string or text blocks")
		return nil
	}
	for i, b := range blocks {
		if b.Type != "text" || strings.TrimSpace(b.Text) == "" {
			p.add("system.%d: must be a non-empty text block", i)
		}
	}
	return blocks
}

// checkMessages checks roles, blocks, tool_use/tool_result pairing and
// thinking blocks.
func (a *Anthropic) checkMessages(p *anthropicProblems, req AnthropicRequest) {
	msgs := req.Messages
	if len(msgs) == 0 {
		p.add("messages: at least one message is required")
		return
	}
	var asked map[string]bool // the tool_use ids of the assistant turn before
	for i, m := range msgs {
		want := "user"
		if i%2 == 1 {
			want = "assistant"
		}
		if m.Role != want {
			p.add("messages.%d.role: roles must alternate between user and assistant, starting with user (got %q)", i, m.Role)
		}
		if len(m.Content) == 0 {
			p.add("messages.%d: content must not be empty", i)
		}
		if m.Role == "user" {
			a.checkUser(p, i, m, asked)
			asked = nil
			continue
		}
		asked = a.checkAssistant(p, i, m)
		if len(asked) > 0 && i == len(msgs)-1 {
			p.add("messages.%d: tool_use ids were found without tool_result blocks immediately after", i)
		}
	}
	on := req.Thinking != nil && req.Thinking.Type == "enabled"
	if last := msgs[len(msgs)-1]; !on && last.Role == "assistant" {
		for j, b := range last.Content {
			if b.Type == "thinking" || b.Type == "redacted_thinking" {
				p.add("messages.%d.content.%d: When thinking is disabled, an `assistant` message in the final position cannot contain `thinking`. To use thinking blocks, enable `thinking` in your request.", len(msgs)-1, j)
			}
		}
	}
	// With thinking on, the assistant turn a final tool result answers
	// must start with its thinking block.
	if t := req.Thinking; t != nil && t.Type == "enabled" && len(msgs) >= 2 {
		last, prev := msgs[len(msgs)-1], msgs[len(msgs)-2]
		if len(last.Content) > 0 && last.Content[0].Type == "tool_result" && len(prev.Content) > 0 &&
			prev.Content[0].Type != "thinking" && prev.Content[0].Type != "redacted_thinking" {
			p.add("messages.%d.content.0.type: Expected `thinking` or `redacted_thinking`, but found `%s`. When `thinking` is enabled, a final `assistant` message must start with a thinking block", len(msgs)-2, prev.Content[0].Type)
		}
	}
}

func (a *Anthropic) checkUser(p *anthropicProblems, i int, m AnthropicMessage, asked map[string]bool) {
	results := true // still in the leading tool_result blocks
	for j, b := range m.Content {
		switch b.Type {
		case "tool_result":
			if !results {
				p.add("messages.%d.content.%d: tool_result blocks must come first in the user message", i, j)
			}
			if !asked[b.ToolUseID] {
				p.add("messages.%d.content.%d: unexpected tool_use_id %q in tool_result blocks: each tool_result block must have a corresponding tool_use block in the previous message", i, j, b.ToolUseID)
			}
			delete(asked, b.ToolUseID)
		case "text":
			results = false
			if strings.TrimSpace(b.Text) == "" {
				p.add("messages.%d.content.%d: text content blocks must contain non-whitespace text", i, j)
			}
		case "image", "document":
			results = false
		default:
			p.add("messages.%d.content.%d: block type %q is not allowed in a user message", i, j, b.Type)
		}
	}
	for id := range asked {
		p.add("messages.%d: tool_use id %q has no tool_result block immediately after", i-1, id)
	}
}

// checkAssistant checks an assistant turn and returns its tool_use ids.
func (a *Anthropic) checkAssistant(p *anthropicProblems, i int, m AnthropicMessage) map[string]bool {
	asked := map[string]bool{}
	lead := true // still in the leading thinking blocks
	for j, b := range m.Content {
		switch b.Type {
		case "thinking":
			if !lead {
				p.add("messages.%d.content.%d: thinking blocks must come first", i, j)
			}
			a.mu.Lock()
			text, issued := a.sigs[b.Signature]
			a.mu.Unlock()
			if !issued || text != b.Thinking {
				p.add("messages.%d.content.%d: Invalid `signature` in `thinking` block (not sent back unchanged)", i, j)
			}
		case "redacted_thinking":
			if !lead || b.Data == "" {
				p.add("messages.%d.content.%d: redacted_thinking must come first and carry its data", i, j)
			}
		case "text":
			lead = false
			if strings.TrimSpace(b.Text) == "" {
				p.add("messages.%d.content.%d: text content blocks must contain non-whitespace text", i, j)
			}
		case "tool_use":
			lead = false
			if !anthropicToolID.MatchString(b.ID) || asked[b.ID] {
				p.add("messages.%d.content.%d: tool_use id %q is invalid or repeated", i, j, b.ID)
			}
			if b.Name == "" {
				p.add("messages.%d.content.%d.name: Field required", i, j)
			}
			var in map[string]any
			if json.Unmarshal(b.Input, &in) != nil || in == nil {
				p.add("messages.%d.content.%d.input: must be an object, got %s", i, j, b.Input)
			}
			asked[b.ID] = true
		default:
			p.add("messages.%d.content.%d: block type %q is not allowed in an assistant message", i, j, b.Type)
		}
	}
	return asked
}

// anthropicCheckTools checks tool definitions: names and object schemas.
func anthropicCheckTools(p *anthropicProblems, tools []AnthropicTool) {
	seen := map[string]bool{}
	for i, t := range tools {
		if !anthropicToolName.MatchString(t.Name) || seen[t.Name] {
			p.add("tools.%d.name: %q is invalid or repeated", i, t.Name)
		}
		seen[t.Name] = true
		var s struct {
			Type string `json:"type"`
		}
		if json.Unmarshal(t.InputSchema, &s) != nil || s.Type != "object" {
			p.add("tools.%d.input_schema: must be a JSON Schema of type object", i)
		}
	}
}

// anthropicCachePaths records where v holds a cache_control (not inside tool
// inputs or schemas) and checks each one's shape.
func anthropicCachePaths(p *anthropicProblems, v any, path string, out *[]string) {
	switch x := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			switch k {
			case "cache_control":
				where := path
				if where == "" {
					where = "request"
				}
				*out = append(*out, where)
				c, _ := x[k].(map[string]any)
				ttl, hasTTL := c["ttl"]
				if c["type"] != "ephemeral" || (hasTTL && ttl != "5m" && ttl != "1h") {
					p.add("%s.cache_control: must be {\"type\": \"ephemeral\"} (ttl 5m or 1h)", where)
				}
			case "input", "input_schema":
			default:
				sub := k
				if path != "" {
					sub = path + "." + k
				}
				anthropicCachePaths(p, x[k], sub, out)
			}
		}
	case []any:
		for i, c := range x {
			anthropicCachePaths(p, c, fmt.Sprintf("%s[%d]", path, i), out)
		}
	}
}
