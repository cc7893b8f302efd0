package llm

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime/document"
	brt "github.com/aws/aws-sdk-go-v2/service/bedrockruntime/types"
)

// bedrockInput is one request in Converse's shape, shared by Converse
// and ConverseStream.
type bedrockInput struct {
	model     string
	system    []brt.SystemContentBlock
	messages  []brt.Message
	tools     *brt.ToolConfiguration
	inference *brt.InferenceConfiguration
	extra     document.Interface
}

func (in *bedrockInput) converse() *bedrockruntime.ConverseInput {
	return &bedrockruntime.ConverseInput{
		ModelId: aws.String(in.model), System: in.system, Messages: in.messages,
		ToolConfig: in.tools, InferenceConfig: in.inference, AdditionalModelRequestFields: in.extra,
	}
}

func (in *bedrockInput) stream() *bedrockruntime.ConverseStreamInput {
	return &bedrockruntime.ConverseStreamInput{
		ModelId: aws.String(in.model), System: in.system, Messages: in.messages,
		ToolConfig: in.tools, InferenceConfig: in.inference, AdditionalModelRequestFields: in.extra,
	}
}

// input converts req: system messages joined into system[{text}];
// user and tool messages into user turns (tool results as toolResult
// blocks), assistant messages into assistant turns (reasoning, text,
// toolUse blocks), consecutive same-role turns merged; tools as
// toolConfig. Bedrock refuses toolUse/toolResult blocks without a
// toolConfig, so a history using tools the request no longer lists gets
// a minimal spec for each name.
func (b *bedrock) input(req Request) (*bedrockInput, error) {
	if req.Model == "" {
		return nil, errors.New("bedrock: request without a model")
	}
	in := &bedrockInput{model: req.Model}
	var sys []string
	used := map[string]bool{}
	for _, m := range req.Messages {
		role, blocks := brt.ConversationRoleUser, []brt.ContentBlock(nil)
		switch m.Role {
		case "system":
			if m.Content != "" {
				sys = append(sys, m.Content)
			}
			continue
		case "user":
			blocks = bedrockText(nil, m.Content)
		case "tool":
			blocks = []brt.ContentBlock{bedrockToolResult(m)}
		case "assistant":
			role = brt.ConversationRoleAssistant
			var err error
			if blocks, err = bedrockAssistant(m, used); err != nil {
				return nil, err
			}
		default:
			return nil, fmt.Errorf("bedrock: message role %q", m.Role)
		}
		if len(blocks) == 0 {
			continue
		}
		if n := len(in.messages); n > 0 && in.messages[n-1].Role == role {
			in.messages[n-1].Content = append(in.messages[n-1].Content, blocks...)
			continue
		}
		in.messages = append(in.messages, brt.Message{Role: role, Content: blocks})
	}
	if len(sys) > 0 {
		in.system = []brt.SystemContentBlock{&brt.SystemContentBlockMemberText{Value: strings.Join(sys, "\n\n")}}
	}
	tools, err := bedrockTools(req.Tools, used)
	if err != nil {
		return nil, err
	}
	in.tools = tools
	maxTokens := req.MaxTokens
	if maxTokens <= 0 {
		maxTokens = b.set.MaxTokens
	}
	if budget := b.set.ThinkingBudgetTokens; budget > 0 {
		if maxTokens <= budget {
			maxTokens = budget + DefaultMaxTokens
		}
		in.extra = document.NewLazyDocument(map[string]any{
			"thinking": map[string]any{"type": "enabled", "budget_tokens": budget},
		})
	}
	if maxTokens > 0 {
		in.inference = &brt.InferenceConfiguration{MaxTokens: aws.Int32(int32(min(maxTokens, 1<<30)))}
	}
	return in, nil
}

// bedrockText appends a text block unless s is blank (Bedrock refuses
// blank text blocks).
func bedrockText(blocks []brt.ContentBlock, s string) []brt.ContentBlock {
	if strings.TrimSpace(s) == "" {
		return blocks
	}
	return append(blocks, &brt.ContentBlockMemberText{Value: s})
}

func bedrockToolResult(m Message) brt.ContentBlock {
	content := []brt.ToolResultContentBlock{}
	if m.Content != "" {
		content = append(content, &brt.ToolResultContentBlockMemberText{Value: m.Content})
	}
	return &brt.ContentBlockMemberToolResult{Value: brt.ToolResultBlock{
		ToolUseId: aws.String(bedrockToolID(m.ToolCallID)), Content: content,
	}}
}

// bedrockAssistant is an assistant turn: its reasoning blocks first,
// unchanged (Claude requires them back within a tool loop), then its
// text, then its tool calls. It records the tools' names in used.
func bedrockAssistant(m Message, used map[string]bool) ([]brt.ContentBlock, error) {
	var blocks []brt.ContentBlock
	for _, t := range m.Thinking {
		var rc brt.ReasoningContentBlock
		if t.Redacted != "" {
			data, err := base64.StdEncoding.DecodeString(t.Redacted)
			if err != nil {
				return nil, fmt.Errorf("bedrock: redacted reasoning is not base64: %w", err)
			}
			rc = &brt.ReasoningContentBlockMemberRedactedContent{Value: data}
		} else {
			rt := brt.ReasoningTextBlock{Text: aws.String(t.Text)}
			if t.Signature != "" {
				rt.Signature = aws.String(t.Signature)
			}
			rc = &brt.ReasoningContentBlockMemberReasoningText{Value: rt}
		}
		blocks = append(blocks, &brt.ContentBlockMemberReasoningContent{Value: rc})
	}
	blocks = bedrockText(blocks, m.Content)
	for _, c := range m.ToolCalls {
		used[c.Function.Name] = true
		blocks = append(blocks, &brt.ContentBlockMemberToolUse{Value: brt.ToolUseBlock{
			ToolUseId: aws.String(bedrockToolID(c.ID)),
			Name:      aws.String(c.Function.Name),
			Input:     document.NewLazyDocument(bedrockArgs(c.Function.Arguments)),
		}})
	}
	return blocks, nil
}

// bedrockArgs is a tool call's arguments as a document value: "" and
// arguments that are not JSON (a truncated call) read as {}.
func bedrockArgs(s string) any {
	var v any
	if strings.TrimSpace(s) == "" || json.Unmarshal([]byte(s), &v) != nil || v == nil {
		return map[string]any{}
	}
	return v
}

// bedrockToolID makes an id fit toolUseId's pattern [a-zA-Z0-9_-]{1,64}
// (ids from another provider may not); the same id maps the same way in
// the toolUse and its toolResult.
func bedrockToolID(id string) string {
	var sb strings.Builder
	for _, r := range id {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_', r == '-':
			sb.WriteRune(r)
		default:
			sb.WriteByte('_')
		}
		if sb.Len() >= 64 {
			break
		}
	}
	if sb.Len() == 0 {
		return "call_"
	}
	return sb.String()
}

func bedrockTools(specs []ToolSpec, used map[string]bool) (*brt.ToolConfiguration, error) {
	if len(specs) == 0 && len(used) == 0 {
		return nil, nil
	}
	cfg := &brt.ToolConfiguration{}
	for _, t := range specs {
		schema := any(map[string]any{"type": "object", "properties": map[string]any{}})
		if len(t.Function.Parameters) > 0 && string(t.Function.Parameters) != "null" {
			if err := json.Unmarshal(t.Function.Parameters, &schema); err != nil {
				return nil, fmt.Errorf("bedrock: tool %q parameters: %w", t.Function.Name, err)
			}
		}
		spec := brt.ToolSpecification{
			Name:        aws.String(t.Function.Name),
			InputSchema: &brt.ToolInputSchemaMemberJson{Value: document.NewLazyDocument(schema)},
		}
		if t.Function.Description != "" {
			spec.Description = aws.String(t.Function.Description)
		}
		cfg.Tools = append(cfg.Tools, &brt.ToolMemberToolSpec{Value: spec})
		delete(used, t.Function.Name)
	}
	for name := range used {
		cfg.Tools = append(cfg.Tools, &brt.ToolMemberToolSpec{Value: brt.ToolSpecification{
			Name:        aws.String(name),
			InputSchema: &brt.ToolInputSchemaMemberJson{Value: document.NewLazyDocument(map[string]any{"type": "object", "properties": map[string]any{}})},
		}})
	}
	return cfg, nil
}

// bedrockFinish maps Bedrock's stopReason to OpenAI's finish_reason.
func bedrockFinish(r brt.StopReason) string {
	switch r {
	case brt.StopReasonToolUse:
		return "tool_calls"
	case brt.StopReasonMaxTokens, brt.StopReasonModelContextWindowExceeded:
		return "length"
	case brt.StopReasonGuardrailIntervened, brt.StopReasonContentFiltered:
		return "content_filter"
	default: // end_turn, stop_sequence
		return "stop"
	}
}

// bedrockUsage fills r's token counts from Bedrock's usage. Bedrock's
// inputTokens, like Anthropic's input_tokens, excludes the tokens read
// from and written to the prompt cache: PromptTokens adds them back.
func bedrockUsage(r *Result, u *brt.TokenUsage) {
	if u == nil {
		return
	}
	i32 := func(p *int32) int64 {
		if p == nil {
			return 0
		}
		return int64(*p)
	}
	r.CacheReadTokens = i32(u.CacheReadInputTokens)
	r.CacheWriteTokens = i32(u.CacheWriteInputTokens)
	r.PromptTokens = i32(u.InputTokens) + r.CacheReadTokens + r.CacheWriteTokens
	r.CompletionTokens = i32(u.OutputTokens)
}

// bedrockResult converts a whole Converse answer.
func bedrockResult(out *bedrockruntime.ConverseOutput) (Result, error) {
	msg, ok := out.Output.(*brt.ConverseOutputMemberMessage)
	if !ok {
		return Result{}, Malformed("bedrock: answer without output.message")
	}
	var r Result
	var text strings.Builder
	for _, blk := range msg.Value.Content {
		switch v := blk.(type) {
		case *brt.ContentBlockMemberText:
			text.WriteString(v.Value)
		case *brt.ContentBlockMemberToolUse:
			args, err := bedrockDocJSON(v.Value.Input)
			if err != nil {
				return Result{}, err
			}
			r.ToolCalls = append(r.ToolCalls, ToolCall{
				ID: bedrockCallID(aws.ToString(v.Value.ToolUseId)), Type: "function",
				Function: ToolFunction{Name: aws.ToString(v.Value.Name), Arguments: args},
			})
		case *brt.ContentBlockMemberReasoningContent:
			switch rc := v.Value.(type) {
			case *brt.ReasoningContentBlockMemberReasoningText:
				r.Thinking = append(r.Thinking, Thinking{Text: aws.ToString(rc.Value.Text), Signature: aws.ToString(rc.Value.Signature)})
			case *brt.ReasoningContentBlockMemberRedactedContent:
				r.Thinking = append(r.Thinking, Thinking{Redacted: base64.StdEncoding.EncodeToString(rc.Value)})
			}
		}
	}
	r.Content = text.String()
	r.FinishReason = bedrockFinish(out.StopReason)
	bedrockUsage(&r, out.Usage)
	return r, nil
}

// bedrockDocJSON is a toolUse input document as a JSON string ("{}" for
// none).
func bedrockDocJSON(d document.Interface) (string, error) {
	if d == nil {
		return "{}", nil
	}
	b, err := d.MarshalSmithyDocument()
	if err != nil {
		return "", Malformed("bedrock: unreadable toolUse input")
	}
	if s := string(b); s != "null" {
		return s, nil
	}
	return "{}", nil
}
