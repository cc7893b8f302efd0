// The anthropic_native answer, whole or streamed, as a Result: text,
// tool_use blocks as OpenAI tool calls, thinking blocks with their
// signatures, usage in OpenAI's convention and the stop reason as OpenAI's
// finish reason. A stream follows
// https://docs.anthropic.com/en/api/messages-streaming (message_start,
// content_block_start/delta/stop, message_delta, message_stop, ping,
// error), decoded by the SDK and bounded here.
package llm

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"strings"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/packages/ssestream"
)

// anthropicMaxBlocks bounds the content blocks of one answer.
const anthropicMaxBlocks = 1024

// anthropicFinish maps a stop_reason to OpenAI's finish_reason.
func anthropicFinish(reason string) string {
	switch reason {
	case "tool_use":
		return "tool_calls"
	case "max_tokens", "model_context_window_exceeded":
		return "length"
	case "refusal":
		return "content_filter"
	default: // end_turn, stop_sequence, pause_turn
		return "stop"
	}
}

// anthropicHex is n random bytes in hex.
func anthropicHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// anthropicCallID is a tool call's id, made up when the answer has none.
func anthropicCallID(id string) string {
	if id == "" {
		return "call_" + anthropicHex(12)
	}
	return id
}

// anthropicUsage fills res's token counts from the API's usage: input
// excludes the cache parts, which PromptTokens includes.
func anthropicUsage(res *Result, in, cacheWrite, cacheRead, out, thinking int64) {
	res.PromptTokens = in + cacheWrite + cacheRead
	res.CacheWriteTokens = cacheWrite
	res.CacheReadTokens = cacheRead
	res.CompletionTokens = out
	res.ReasoningTokens = thinking
}

// anthropicWhole is the Result of a whole answer.
func anthropicWhole(msg *anthropic.Message, maxAnswer int) (Result, error) {
	if msg == nil || msg.Type != "message" || !msg.JSON.Content.Valid() {
		return Result{}, Malformed("anthropic: answer is not a message")
	}
	var res Result
	var text strings.Builder
	for _, b := range msg.Content {
		switch b.Type {
		case "text":
			text.WriteString(b.Text)
		case "tool_use":
			args := "{}"
			if len(b.Input) > 0 && string(b.Input) != "null" {
				args = string(b.Input)
			}
			res.ToolCalls = append(res.ToolCalls, ToolCall{ID: anthropicCallID(b.ID), Type: "function",
				Function: ToolFunction{Name: b.Name, Arguments: args}})
		case "thinking":
			res.Thinking = append(res.Thinking, Thinking{Text: b.Thinking, Signature: b.Signature})
		case "redacted_thinking":
			res.Thinking = append(res.Thinking, Thinking{Redacted: b.Data})
		}
	}
	res.Content = text.String()
	u := msg.Usage
	anthropicUsage(&res, u.InputTokens, u.CacheCreationInputTokens, u.CacheReadInputTokens, u.OutputTokens, u.OutputTokensDetails.ThinkingTokens)
	res.FinishReason = anthropicFinish(string(msg.StopReason))
	if AnswerSize(&res) > maxAnswer {
		return Result{}, TooLarge(maxAnswer)
	}
	return res, nil
}

// anthropicDeltaError carries onDelta's error out of the stream loop, to
// be returned unchanged.
type anthropicDeltaError struct{ err error }

func (e anthropicDeltaError) Error() string { return e.err.Error() }

// anthStreamBlock is one content block of a streamed answer as it arrives.
type anthStreamBlock struct {
	typ           string
	text, args    strings.Builder // thinking text or redacted data; tool input
	id, name, sig string
}

// anthropicStream assembles a streamed answer.
type anthropicStream struct {
	content                   strings.Builder // the text deltas, in arrival order
	blocks                    map[int64]*anthStreamBlock
	order                     []*anthStreamBlock
	size, max                 int
	started                   bool
	reason                    string
	onDelta                   OnDelta
	in, cw, cr, out, thinking int64
}

// grow counts n more bytes of answer against the bound.
func (a *anthropicStream) grow(n int) error {
	a.size += n
	if a.size > a.max {
		return TooLarge(a.max)
	}
	return nil
}

// readAnthropicStream reads s to its message_stop, passing each text
// delta to onDelta; the errors are the stream's (for anthropicFail),
// an *Error of its own, or an anthropicDeltaError.
func readAnthropicStream(s *ssestream.Stream[anthropic.MessageStreamEventUnion], maxAnswer int, onDelta OnDelta) (Result, error) {
	a := &anthropicStream{blocks: map[int64]*anthStreamBlock{}, max: maxAnswer, onDelta: onDelta}
	for s.Next() {
		ev := s.Current()
		if ev.Type == "message_stop" {
			if !a.started {
				return Result{}, Malformed("anthropic: message_stop before message_start")
			}
			return a.result(), nil
		}
		if err := a.event(&ev); err != nil {
			return Result{}, err
		}
	}
	if err := s.Err(); err != nil {
		return Result{}, err
	}
	return Result{}, Malformed("anthropic: stream ended before message_stop")
}

// event applies one event of the stream.
func (a *anthropicStream) event(ev *anthropic.MessageStreamEventUnion) error {
	if ev.Type != "message_start" && !a.started {
		return Malformed("anthropic: stream does not start with message_start")
	}
	switch ev.Type {
	case "message_start":
		if a.started {
			return Malformed("anthropic: second message_start")
		}
		a.started = true
		u := ev.Message.Usage
		a.in, a.cw, a.cr, a.out = u.InputTokens, u.CacheCreationInputTokens, u.CacheReadInputTokens, u.OutputTokens
	case "content_block_start":
		return a.start(ev)
	case "content_block_delta":
		return a.delta(ev)
	case "message_delta":
		a.reason = string(ev.Delta.StopReason)
		u := ev.Usage // cumulative counts; input ones only where the API sends them
		if u.JSON.OutputTokens.Valid() {
			a.out = u.OutputTokens
		}
		if u.JSON.InputTokens.Valid() && u.InputTokens > 0 {
			a.in = u.InputTokens
		}
		if u.JSON.CacheCreationInputTokens.Valid() && u.CacheCreationInputTokens > 0 {
			a.cw = u.CacheCreationInputTokens
		}
		if u.JSON.CacheReadInputTokens.Valid() && u.CacheReadInputTokens > 0 {
			a.cr = u.CacheReadInputTokens
		}
		a.thinking = u.OutputTokensDetails.ThinkingTokens
	}
	return nil // content_block_stop, unknown events
}

func (a *anthropicStream) start(ev *anthropic.MessageStreamEventUnion) error {
	if _, dup := a.blocks[ev.Index]; dup {
		return Malformed(fmt.Sprintf("anthropic: block %d started twice", ev.Index))
	}
	if len(a.order) >= anthropicMaxBlocks {
		return Malformed("anthropic: too many content blocks")
	}
	cb := ev.ContentBlock
	b := &anthStreamBlock{typ: cb.Type}
	a.blocks[ev.Index] = b
	a.order = append(a.order, b)
	switch cb.Type {
	case "text":
		return a.text(cb.Text)
	case "tool_use":
		b.id, b.name = cb.ID, cb.Name
		return a.grow(len(b.id) + len(b.name))
	case "thinking":
		b.text.WriteString(cb.Thinking)
		b.sig = cb.Signature
		return a.grow(len(cb.Thinking) + len(cb.Signature))
	case "redacted_thinking":
		b.text.WriteString(cb.Data)
		return a.grow(len(cb.Data))
	}
	return nil
}

// text adds a text delta to the answer and passes it on.
func (a *anthropicStream) text(s string) error {
	if s == "" {
		return nil
	}
	if err := a.grow(len(s)); err != nil {
		return err
	}
	a.content.WriteString(s) // in arrival order: what onDelta saw
	if err := a.onDelta(s); err != nil {
		return anthropicDeltaError{err}
	}
	return nil
}

func (a *anthropicStream) delta(ev *anthropic.MessageStreamEventUnion) error {
	b := a.blocks[ev.Index]
	if b == nil {
		return Malformed(fmt.Sprintf("anthropic: delta for block %d before its start", ev.Index))
	}
	d := ev.Delta
	want := map[string]string{"text_delta": "text", "input_json_delta": "tool_use", "thinking_delta": "thinking", "signature_delta": "thinking"}[d.Type]
	if want == "" {
		return nil // citations_delta and deltas this client does not use
	}
	if want != b.typ {
		return Malformed(fmt.Sprintf("anthropic: %s for a %s block", d.Type, b.typ))
	}
	switch d.Type {
	case "text_delta":
		return a.text(d.Text)
	case "input_json_delta":
		b.args.WriteString(d.PartialJSON)
		return a.grow(len(d.PartialJSON))
	case "thinking_delta":
		b.text.WriteString(d.Thinking)
		return a.grow(len(d.Thinking))
	default: // signature_delta
		b.sig += d.Signature
		return a.grow(len(d.Signature))
	}
}

// result is the assembled answer.
func (a *anthropicStream) result() Result {
	res := Result{Content: a.content.String()}
	for _, b := range a.order {
		switch b.typ {
		case "tool_use":
			args := b.args.String()
			if strings.TrimSpace(args) == "" {
				args = "{}"
			}
			res.ToolCalls = append(res.ToolCalls, ToolCall{ID: anthropicCallID(b.id), Type: "function",
				Function: ToolFunction{Name: b.name, Arguments: args}})
		case "thinking":
			res.Thinking = append(res.Thinking, Thinking{Text: b.text.String(), Signature: b.sig})
		case "redacted_thinking":
			res.Thinking = append(res.Thinking, Thinking{Redacted: b.text.String()})
		}
	}
	anthropicUsage(&res, a.in, a.cw, a.cr, a.out, a.thinking)
	res.FinishReason = anthropicFinish(a.reason)
	return res
}

// anthSSEBound bounds a stream's body: an event (the bytes between two blank
// lines) to event bytes, the whole body to totalLeft; past either, reads
// fail with a TooLarge *Error. The SDK's decoder would buffer an event of
// any size.
type anthSSEBound struct {
	r                io.ReadCloser
	event, eventLeft int64
	totalLeft        int64
	maxAnswer        int
	nl               bool // the last byte ended a line
}

func (b *anthSSEBound) Read(p []byte) (int, error) {
	if b.totalLeft <= 0 {
		return 0, TooLarge(b.maxAnswer)
	}
	if int64(len(p)) > b.totalLeft {
		p = p[:b.totalLeft]
	}
	n, err := b.r.Read(p)
	b.totalLeft -= int64(n)
	for _, c := range p[:n] {
		switch c {
		case '\n':
			if b.nl {
				b.eventLeft = b.event
			}
			b.nl = true
		case '\r':
		default:
			b.nl = false
		}
		b.eventLeft--
		if b.eventLeft < 0 {
			return n, TooLarge(b.maxAnswer)
		}
	}
	return n, err
}

// Close closes the body.
func (b *anthSSEBound) Close() error { return b.r.Close() }
