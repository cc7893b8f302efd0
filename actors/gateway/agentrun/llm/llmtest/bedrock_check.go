package llmtest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
)

// bedrockRequest is a Converse / ConverseStream request body as the API
// reference defines it (the fields this gateway may send; any other
// field is refused, as Bedrock refuses unknown fields).
type bedrockRequest struct {
	Messages        []bedrockMessage `json:"messages"`
	System          []bedrockBlock   `json:"system"`
	InferenceConfig *struct {
		MaxTokens     *int     `json:"maxTokens"`
		Temperature   *float64 `json:"temperature"`
		TopP          *float64 `json:"topP"`
		StopSequences []string `json:"stopSequences"`
	} `json:"inferenceConfig"`
	ToolConfig *struct {
		Tools []struct {
			ToolSpec *struct {
				Name        string `json:"name"`
				Description string `json:"description"`
				InputSchema struct {
					JSON json.RawMessage `json:"json"`
				} `json:"inputSchema"`
			} `json:"toolSpec"`
		} `json:"tools"`
		ToolChoice json.RawMessage `json:"toolChoice"`
	} `json:"toolConfig"`
	AdditionalModelRequestFields json.RawMessage `json:"additionalModelRequestFields"`
}

type bedrockMessage struct {
	Role    string         `json:"role"`
	Content []bedrockBlock `json:"content"`
}

// bedrockBlock is one ContentBlock (a union: exactly one member set).
type bedrockBlock struct {
	Text    *string `json:"text"`
	ToolUse *struct {
		ToolUseID string          `json:"toolUseId"`
		Name      string          `json:"name"`
		Input     json.RawMessage `json:"input"`
	} `json:"toolUse"`
	ToolResult *struct {
		ToolUseID string `json:"toolUseId"`
		Content   []struct {
			Text *string         `json:"text"`
			JSON json.RawMessage `json:"json"`
		} `json:"content"`
		Status string `json:"status"`
	} `json:"toolResult"`
	ReasoningContent *struct {
		ReasoningText *struct {
			Text      string `json:"text"`
			Signature string `json:"signature"`
		} `json:"reasoningText"`
		RedactedContent []byte `json:"redactedContent"`
	} `json:"reasoningContent"`
	CachePoint json.RawMessage `json:"cachePoint"`
}

func (b *bedrockBlock) members() int {
	n := 0
	for _, set := range []bool{b.Text != nil, b.ToolUse != nil, b.ToolResult != nil, b.ReasoningContent != nil, b.CachePoint != nil} {
		if set {
			n++
		}
	}
	return n
}

var bedrockToolIDRE = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// parseBedrockRequest decodes body strictly and checks the API's rules:
// messages start with a user turn and alternate user/assistant; every
// block is one union member; text is not blank; toolUse only in an
// assistant turn, answered by toolResult blocks (same ids, each once) in
// the very next user turn and nowhere else; a toolConfig names every
// tool used; reasoning blocks come first in an assistant turn, and one
// the stub signed with a tool call comes back, unchanged, beside it.
// It returns the last user text.
func (b *Bedrock) parseBedrockRequest(body []byte) (bedrockRequest, string, error) {
	var req bedrockRequest
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return req, "", fmt.Errorf("body: %w", err)
	}
	tools := map[string]bool{}
	if req.ToolConfig != nil {
		if len(req.ToolConfig.Tools) == 0 {
			return req, "", fmt.Errorf("toolConfig.tools is empty")
		}
		for i, t := range req.ToolConfig.Tools {
			if t.ToolSpec == nil || t.ToolSpec.Name == "" {
				return req, "", fmt.Errorf("toolConfig.tools[%d]: toolSpec.name missing", i)
			}
			var schema map[string]any
			if json.Unmarshal(t.ToolSpec.InputSchema.JSON, &schema) != nil || schema["type"] == nil {
				return req, "", fmt.Errorf("toolConfig.tools[%d].toolSpec.inputSchema.json is not a JSON Schema object", i)
			}
			tools[t.ToolSpec.Name] = true
		}
	}
	for i, s := range req.System {
		if s.Text == nil && s.CachePoint == nil || s.Text != nil && strings.TrimSpace(*s.Text) == "" {
			return req, "", fmt.Errorf("system[%d]: a text block must not be blank", i)
		}
	}
	if ic := req.InferenceConfig; ic != nil && ic.MaxTokens != nil && *ic.MaxTokens < 1 {
		return req, "", fmt.Errorf("inferenceConfig.maxTokens must be at least 1")
	}
	if err := b.checkThinking(req); err != nil {
		return req, "", err
	}
	lastUser, err := b.checkMessages(req.Messages, tools)
	return req, lastUser, err
}

func (b *Bedrock) checkThinking(req bedrockRequest) error {
	if len(req.AdditionalModelRequestFields) == 0 {
		return nil
	}
	var f struct {
		Thinking *struct {
			Type         string `json:"type"`
			BudgetTokens int    `json:"budget_tokens"`
		} `json:"thinking"`
	}
	if err := json.Unmarshal(req.AdditionalModelRequestFields, &f); err != nil {
		return fmt.Errorf("additionalModelRequestFields: %w", err)
	}
	if f.Thinking == nil {
		return nil
	}
	if f.Thinking.Type != "enabled" || f.Thinking.BudgetTokens < 1024 {
		return fmt.Errorf("thinking needs type enabled and budget_tokens >= 1024")
	}
	if req.InferenceConfig == nil || req.InferenceConfig.MaxTokens == nil || *req.InferenceConfig.MaxTokens <= f.Thinking.BudgetTokens {
		return fmt.Errorf("inferenceConfig.maxTokens must be greater than thinking.budget_tokens")
	}
	return nil
}

func (b *Bedrock) checkMessages(msgs []bedrockMessage, tools map[string]bool) (string, error) {
	if len(msgs) == 0 {
		return "", fmt.Errorf("messages is empty")
	}
	var lastUser string
	var pending map[string]bool // toolUse ids the next user turn must answer
	for i, m := range msgs {
		want := "user"
		if i%2 == 1 {
			want = "assistant"
		}
		if m.Role != want {
			return "", fmt.Errorf("messages[%d].role is %q: a conversation starts with user and alternates user/assistant", i, m.Role)
		}
		if len(m.Content) == 0 {
			return "", fmt.Errorf("messages[%d].content is empty", i)
		}
		var err error
		if m.Role == "user" {
			lastUser, err = b.checkUser(i, m, pending)
			pending = nil
		} else {
			pending, err = b.checkAssistant(i, m, tools)
		}
		if err != nil {
			return "", err
		}
	}
	if len(pending) > 0 {
		return "", fmt.Errorf("the last message has toolUse blocks with no toolResult")
	}
	return lastUser, nil
}

func (b *Bedrock) checkUser(i int, m bedrockMessage, pending map[string]bool) (string, error) {
	var text []string
	for j, blk := range m.Content {
		if blk.members() != 1 {
			return "", fmt.Errorf("messages[%d].content[%d] must set exactly one member", i, j)
		}
		switch {
		case blk.Text != nil:
			if strings.TrimSpace(*blk.Text) == "" {
				return "", fmt.Errorf("messages[%d].content[%d].text is blank", i, j)
			}
			text = append(text, *blk.Text)
		case blk.ToolResult != nil:
			id := blk.ToolResult.ToolUseID
			if !pending[id] {
				return "", fmt.Errorf("messages[%d].content[%d].toolResult.toolUseId %q answers no toolUse of the previous assistant turn (or answers it twice)", i, j, id)
			}
			delete(pending, id)
			if s := blk.ToolResult.Status; s != "" && s != "success" && s != "error" {
				return "", fmt.Errorf("toolResult.status %q", s)
			}
		case blk.ToolUse != nil, blk.ReasoningContent != nil:
			return "", fmt.Errorf("messages[%d].content[%d]: toolUse and reasoningContent belong to assistant turns", i, j)
		}
	}
	if len(pending) > 0 {
		return "", fmt.Errorf("messages[%d]: the toolUse blocks of the previous assistant turn need their toolResult blocks here (%d missing)", i, len(pending))
	}
	return strings.Join(text, "\n"), nil
}

func (b *Bedrock) checkAssistant(i int, m bedrockMessage, tools map[string]bool) (map[string]bool, error) {
	pending := map[string]bool{}
	sigs := map[string]bool{}
	seenOther := false
	for j, blk := range m.Content {
		if blk.members() != 1 {
			return nil, fmt.Errorf("messages[%d].content[%d] must set exactly one member", i, j)
		}
		switch {
		case blk.ReasoningContent != nil:
			if seenOther {
				return nil, fmt.Errorf("messages[%d].content[%d]: reasoningContent must come before text and toolUse", i, j)
			}
			if rt := blk.ReasoningContent.ReasoningText; rt != nil {
				sigs[rt.Signature] = true
			}
		case blk.Text != nil:
			seenOther = true
			if strings.TrimSpace(*blk.Text) == "" {
				return nil, fmt.Errorf("messages[%d].content[%d].text is blank", i, j)
			}
		case blk.ToolUse != nil:
			seenOther = true
			tu := blk.ToolUse
			if !bedrockToolIDRE.MatchString(tu.ToolUseID) || pending[tu.ToolUseID] {
				return nil, fmt.Errorf("messages[%d].content[%d].toolUse.toolUseId %q is invalid or repeated", i, j, tu.ToolUseID)
			}
			if !tools[tu.Name] {
				return nil, fmt.Errorf("messages[%d].content[%d].toolUse.name %q is not in toolConfig (toolConfig is required with toolUse blocks)", i, j, tu.Name)
			}
			var in any
			if json.Unmarshal(tu.Input, &in) != nil || in == nil {
				return nil, fmt.Errorf("messages[%d].content[%d].toolUse.input is missing or not JSON", i, j)
			}
			b.mu.Lock()
			sig, signed := b.sigs[tu.ToolUseID]
			b.mu.Unlock()
			if signed && !sigs[sig] {
				return nil, fmt.Errorf("messages[%d]: the reasoning block (signature %q) sent with toolUse %q must come back unchanged", i, sig, tu.ToolUseID)
			}
			pending[tu.ToolUseID] = true
		case blk.ToolResult != nil:
			return nil, fmt.Errorf("messages[%d].content[%d]: toolResult belongs to user turns", i, j)
		}
	}
	return pending, nil
}
