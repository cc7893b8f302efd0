// The anthropic_native request: the OpenAI-shaped messages and tools of a
// Request turned into a Messages API body that obeys the API's rules
// (https://docs.anthropic.com/en/api/messages): a top-level system prompt,
// user and assistant turns that alternate and start with user, each
// assistant tool_use answered by a tool_result at the start of the next
// user turn, thinking blocks sent back first and unchanged; and its JSON.
package llm

import (
	"bytes"
	"encoding/json"
	"strings"
)

// anthropicPlaceholder is the text of a user turn the API needs where the
// conversation has none: before a first assistant turn, or when it holds
// nothing but a system prompt (as LiteLLM does).
const anthropicPlaceholder = "."

// anthropicNoResult answers a tool_use that the history leaves without a
// result (a run cut short): the API refuses an unanswered tool_use.
const anthropicNoResult = "no result: the tool call was not completed"

// Block kinds of anthBlock.
const (
	anthText = iota
	anthThinking
	anthRedacted
	anthToolUse
	anthToolResult
)

// anthBlock is one content block of a request (its JSON: MarshalJSON).
type anthBlock struct {
	kind    int
	text    string // text, thinking, redacted data, tool result content
	sig     string
	id      string // tool_use id, tool_result tool_use_id
	name    string
	input   json.RawMessage
	isError bool
}

// anthTurn is one user or assistant turn: lead blocks (an assistant's
// thinking, a user's tool results) before the text, tool uses after it.
type anthTurn struct {
	user             bool
	lead, text, tail []anthBlock
}

func (t *anthTurn) empty() bool { return len(t.lead)+len(t.text)+len(t.tail) == 0 }

// anthropicTurns converts messages into the system prompt and the turns,
// merging consecutive same-role messages.
func anthropicTurns(msgs []Message) (string, []anthTurn) {
	var system []string
	var turns []anthTurn
	add := func(t anthTurn) {
		if t.empty() {
			return
		}
		if n := len(turns); n > 0 && turns[n-1].user == t.user {
			last := &turns[n-1]
			last.lead = append(last.lead, t.lead...)
			last.text = append(last.text, t.text...)
			last.tail = append(last.tail, t.tail...)
			return
		}
		turns = append(turns, t)
	}
	for _, m := range msgs {
		switch m.Role {
		case "system", "developer":
			if strings.TrimSpace(m.Content) != "" {
				system = append(system, m.Content)
			}
		case "assistant":
			t := anthTurn{}
			for _, th := range m.Thinking {
				switch {
				case th.Redacted != "":
					t.lead = append(t.lead, anthBlock{kind: anthRedacted, text: th.Redacted})
				case th.Signature != "" && !strings.HasPrefix(th.Signature, GeminiSignaturePrefix):
					// An unsigned block, or another provider's, is refused.
					t.lead = append(t.lead, anthBlock{kind: anthThinking, text: th.Text, sig: th.Signature})
				}
			}
			if strings.TrimSpace(m.Content) != "" {
				t.text = append(t.text, anthBlock{kind: anthText, text: m.Content})
			}
			for _, c := range m.ToolCalls {
				id := c.ID
				if id == "" {
					id = "toolu_" + anthropicHex(12)
				}
				t.tail = append(t.tail, anthBlock{kind: anthToolUse, id: id, name: c.Function.Name, input: anthropicInput(c.Function.Arguments)})
			}
			add(t)
		case "tool":
			add(anthTurn{user: true, lead: []anthBlock{{kind: anthToolResult, id: m.ToolCallID, text: m.Content}}})
		default: // user, and anything unknown read as the user's
			if strings.TrimSpace(m.Content) != "" {
				add(anthTurn{user: true, text: []anthBlock{{kind: anthText, text: m.Content}}})
			}
		}
	}
	return strings.Join(system, "\n\n"), anthRepairTurns(turns)
}

// anthRepairTurns makes turns acceptable to the API: they start with a user
// turn, every tool_use is answered in the next user turn (a missing result
// answered as an error), and a tool_result that answers no tool_use of the
// turn before becomes text.
func anthRepairTurns(turns []anthTurn) []anthTurn {
	if len(turns) == 0 || !turns[0].user {
		turns = append([]anthTurn{{user: true, text: []anthBlock{{kind: anthText, text: anthropicPlaceholder}}}}, turns...)
	}
	if last := turns[len(turns)-1]; !last.user && len(last.tail) > 0 {
		turns = append(turns, anthTurn{user: true})
	}
	for i := range turns {
		if !turns[i].user {
			continue
		}
		asked := map[string]bool{}
		var uses []anthBlock
		if i > 0 {
			uses = turns[i-1].tail
			for _, b := range uses {
				asked[b.id] = true
			}
		}
		t := &turns[i]
		var lead, orphans []anthBlock
		for _, b := range t.lead {
			if asked[b.id] {
				delete(asked, b.id) // a second result for the same call is an orphan
				lead = append(lead, b)
				continue
			}
			orphans = append(orphans, anthBlock{kind: anthText, text: "tool result " + b.id + ": " + b.text})
		}
		for _, u := range uses {
			if asked[u.id] {
				lead = append(lead, anthBlock{kind: anthToolResult, id: u.id, text: anthropicNoResult, isError: true})
			}
		}
		t.lead, t.text = lead, append(orphans, t.text...)
	}
	return turns
}

// anthropicInput is a tool call's arguments as the tool_use input: the
// JSON object they hold, {} when they are empty or not an object.
func anthropicInput(args string) json.RawMessage {
	b := bytes.TrimSpace([]byte(args))
	if len(b) == 0 || b[0] != '{' || !json.Valid(b) {
		return json.RawMessage("{}")
	}
	return json.RawMessage(b)
}

// anthRequest is the body of POST /v1/messages.
type anthRequest struct {
	Model     string       `json:"model"`
	MaxTokens int          `json:"max_tokens"`
	System    []anthSystem `json:"system,omitempty"`
	Messages  []anthTurn   `json:"messages"`
	Tools     []anthTool   `json:"tools,omitempty"`
	Thinking  *anthThinkOn `json:"thinking,omitempty"`
	Stream    bool         `json:"stream,omitempty"`
}

// anthCache is a cache_control breakpoint.
type anthCache struct {
	Type string `json:"type"` // ephemeral
}

// anthEphemeral is the breakpoint set where caching is on (nil : off).
func anthEphemeral(on bool) *anthCache {
	if !on {
		return nil
	}
	return &anthCache{Type: "ephemeral"}
}

// anthSystem is a text block of the system prompt.
type anthSystem struct {
	Type         string     `json:"type"` // text
	Text         string     `json:"text"`
	CacheControl *anthCache `json:"cache_control,omitempty"`
}

// anthTool is a tool definition.
type anthTool struct {
	Name         string          `json:"name"`
	Description  string          `json:"description,omitempty"`
	InputSchema  json.RawMessage `json:"input_schema"`
	CacheControl *anthCache      `json:"cache_control,omitempty"`
}

// anthThinkOn turns extended thinking on.
type anthThinkOn struct {
	Type         string `json:"type"` // enabled
	BudgetTokens int    `json:"budget_tokens"`
}

// The content blocks of a request, one type each: their required fields
// are always sent (a thinking block's text may be "").
type (
	anthTextOut struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	anthThinkingOut struct {
		Type      string `json:"type"`
		Thinking  string `json:"thinking"`
		Signature string `json:"signature"`
	}
	anthRedactedOut struct {
		Type string `json:"type"`
		Data string `json:"data"`
	}
	anthToolUseOut struct {
		Type  string          `json:"type"`
		ID    string          `json:"id"`
		Name  string          `json:"name"`
		Input json.RawMessage `json:"input"`
	}
	anthToolResultOut struct {
		Type      string        `json:"type"`
		ToolUseID string        `json:"tool_use_id"`
		Content   []anthTextOut `json:"content,omitempty"` // an empty text block is refused; no content is not
		IsError   bool          `json:"is_error,omitempty"`
	}
)

// MarshalJSON writes b as the API's content block of its kind.
func (b anthBlock) MarshalJSON() ([]byte, error) {
	switch b.kind {
	case anthThinking:
		return json.Marshal(anthThinkingOut{Type: "thinking", Thinking: b.text, Signature: b.sig})
	case anthRedacted:
		return json.Marshal(anthRedactedOut{Type: "redacted_thinking", Data: b.text})
	case anthToolUse:
		return json.Marshal(anthToolUseOut{Type: "tool_use", ID: b.id, Name: b.name, Input: b.input})
	case anthToolResult:
		r := anthToolResultOut{Type: "tool_result", ToolUseID: b.id, IsError: b.isError}
		if b.text != "" {
			r.Content = []anthTextOut{{Type: "text", Text: b.text}}
		}
		return json.Marshal(r)
	default:
		return json.Marshal(anthTextOut{Type: "text", Text: b.text})
	}
}

// MarshalJSON writes t as a message: its role and its blocks, lead, text
// and tail in that order.
func (t anthTurn) MarshalJSON() ([]byte, error) {
	blocks := make([]anthBlock, 0, len(t.lead)+len(t.text)+len(t.tail))
	blocks = append(append(append(blocks, t.lead...), t.text...), t.tail...)
	role := "assistant"
	if t.user {
		role = "user"
	}
	return json.Marshal(struct {
		Role    string      `json:"role"`
		Content []anthBlock `json:"content"`
	}{role, blocks})
}

// anthropicSchema is a tool's parameters as input_schema: a JSON Schema
// object of type object (an empty or unusable schema takes no input).
func anthropicSchema(p json.RawMessage) json.RawMessage {
	var m map[string]any
	if json.Unmarshal(p, &m) != nil || m == nil {
		m = map[string]any{}
	}
	if _, ok := m["type"]; !ok {
		m["type"] = "object"
	}
	if _, ok := m["properties"]; !ok && m["type"] == "object" {
		m["properties"] = map[string]any{}
	}
	b, err := json.Marshal(m)
	if err != nil {
		return json.RawMessage(`{"properties":{},"type":"object"}`)
	}
	return b
}

// request builds the Messages API body of req.
func (c *anthropicClient) request(req Request, stream bool) anthRequest {
	system, turns := anthropicTurns(req.Messages)
	caching := c.set.PromptCaching == nil || *c.set.PromptCaching
	thinking := c.set.ThinkingBudget != nil && anthThinkingFits(turns)
	if !thinking {
		anthDropThinking(turns)
	}
	r := anthRequest{Model: req.Model, MaxTokens: c.maxTokens(req), Messages: turns, Stream: stream}
	if system != "" {
		r.System = []anthSystem{{Type: "text", Text: system, CacheControl: anthEphemeral(caching)}}
	}
	for i, t := range req.Tools {
		r.Tools = append(r.Tools, anthTool{Name: t.Function.Name, Description: t.Function.Description,
			InputSchema: anthropicSchema(t.Function.Parameters), CacheControl: anthEphemeral(caching && i == len(req.Tools)-1)})
	}
	if thinking {
		r.Thinking = &anthThinkOn{Type: "enabled", BudgetTokens: *c.set.ThinkingBudget}
	}
	return r
}

// anthThinkingFits reports whether thinking may be on for turns: the API
// refuses it mid tool loop (the last turn holds tool results) when the
// assistant turn those results answer does not start with a thinking
// block — a history from before thinking was set, or from another
// provider after a fallback. Thinking is then off for that call.
func anthThinkingFits(turns []anthTurn) bool {
	n := len(turns)
	if n < 2 || len(turns[n-1].lead) == 0 {
		return true
	}
	lead := turns[n-2].lead
	return len(lead) > 0 && (lead[0].kind == anthThinking || lead[0].kind == anthRedacted)
}

// anthDropThinking removes the thinking blocks of a call without thinking:
// the API refuses them in a final assistant turn then, and ignores them
// elsewhere. A turn left empty keeps a placeholder text.
func anthDropThinking(turns []anthTurn) {
	for i := range turns {
		t := &turns[i]
		if t.user || len(t.lead) == 0 {
			continue
		}
		t.lead = nil
		if t.empty() {
			t.text = []anthBlock{{kind: anthText, text: anthropicPlaceholder}}
		}
	}
}

// maxTokens is max_tokens for req: the request's, settings.max_tokens or
// DefaultMaxTokens, raised above the thinking budget when it is not.
func (c *anthropicClient) maxTokens(req Request) int {
	n := req.MaxTokens
	if n <= 0 && c.set.MaxTokens != nil {
		n = *c.set.MaxTokens
	}
	if n <= 0 {
		n = DefaultMaxTokens
	}
	if b := c.set.ThinkingBudget; b != nil && n <= *b {
		n = *b + DefaultMaxTokens
	}
	return n
}
