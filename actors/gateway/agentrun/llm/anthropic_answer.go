// The anthropic_native answer, whole or streamed, as a Result: text,
// tool_use blocks as OpenAI tool calls, thinking blocks with their
// signatures, usage in OpenAI's convention and the stop reason as OpenAI's
// finish reason. A stream follows
// https://docs.anthropic.com/en/api/messages-streaming (message_start,
// content_block_start/delta/stop, message_delta, message_stop, ping,
// error), its events read by anthSSE (anthropic_sse.go).
package llm

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
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

// anthCount is a token count that may be absent or null (Set false).
type anthCount struct {
	N   int64
	Set bool
}

// UnmarshalJSON reads an integer; null leaves c unset.
func (c *anthCount) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		return nil
	}
	n, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil {
		return fmt.Errorf("token count %.20q: %w", b, err)
	}
	c.N, c.Set = n, true
	return nil
}

// anthUsage is an answer's usage: input_tokens excludes the cache parts.
type anthUsage struct {
	InputTokens              anthCount `json:"input_tokens"`
	CacheCreationInputTokens anthCount `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     anthCount `json:"cache_read_input_tokens"`
	OutputTokens             anthCount `json:"output_tokens"`
	OutputTokensDetails      struct {
		ThinkingTokens int64 `json:"thinking_tokens"`
	} `json:"output_tokens_details"`
}

// anthContent is a content block of an answer (or a stream's
// content_block_start), of any type.
type anthContent struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	Thinking  string          `json:"thinking"`
	Signature string          `json:"signature"`
	Data      string          `json:"data"` // redacted_thinking
}

// anthMessage is a whole answer (and a stream's message_start message).
type anthMessage struct {
	Type       string         `json:"type"`
	Content    *[]anthContent `json:"content"` // nil: absent or null
	StopReason string         `json:"stop_reason"`
	Usage      anthUsage      `json:"usage"`
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

// anthropicWhole is the Result of a whole answer's body.
func anthropicWhole(body []byte, maxAnswer int) (Result, error) {
	var msg anthMessage
	if json.Unmarshal(body, &msg) != nil || msg.Type != "message" || msg.Content == nil {
		return Result{}, Malformed("anthropic: answer is not a message")
	}
	var res Result
	var text strings.Builder
	for _, b := range *msg.Content {
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
	anthropicUsage(&res, u.InputTokens.N, u.CacheCreationInputTokens.N, u.CacheReadInputTokens.N, u.OutputTokens.N, u.OutputTokensDetails.ThinkingTokens)
	res.FinishReason = anthropicFinish(msg.StopReason)
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

// anthEvent is one event of a stream, of any type.
type anthEvent struct {
	Type         string      `json:"type"`
	Index        int64       `json:"index"`
	Message      anthMessage `json:"message"`       // message_start
	ContentBlock anthContent `json:"content_block"` // content_block_start
	Delta        struct {
		Type        string `json:"type"`
		Text        string `json:"text"`
		PartialJSON string `json:"partial_json"`
		Thinking    string `json:"thinking"`
		Signature   string `json:"signature"`
		StopReason  string `json:"stop_reason"` // message_delta
	} `json:"delta"`
	Usage anthUsage `json:"usage"` // message_delta: cumulative
}

// readAnthropicStream reads a stream's body to its message_stop, passing
// each text delta to onDelta. Its errors are an *Error (malformed, too
// large, the stream's error event), an anthropicDeltaError, or the body's
// read error (a connection cut short).
func readAnthropicStream(body io.Reader, maxAnswer int, onDelta OnDelta) (Result, error) {
	s := newAnthSSE(body, maxAnswer)
	a := &anthropicStream{blocks: map[int64]*anthStreamBlock{}, max: maxAnswer, onDelta: onDelta}
	var ev anthEvent
	for {
		name, data, err := s.next()
		if errors.Is(err, io.EOF) {
			return Result{}, Malformed("anthropic: stream ended before message_stop")
		}
		if err != nil {
			return Result{}, err
		}
		switch string(name) {
		case "", "ping": // unnamed events are not the API's
			continue
		case "error":
			return Result{}, StreamError(ErrorBody(data))
		}
		if len(data) == 0 {
			continue
		}
		ev = anthEvent{}
		if json.Unmarshal(data, &ev) != nil {
			return Result{}, Malformed("anthropic: unreadable " + anthEventName(name) + " event")
		}
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
}

// anthEventName is an event's name for an error message: printable and
// short.
func anthEventName(name []byte) string {
	if len(name) > 40 {
		name = name[:40]
	}
	return strconv.Quote(string(name))
}

// event applies one event of the stream.
func (a *anthropicStream) event(ev *anthEvent) error {
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
		a.in, a.cw, a.cr, a.out = u.InputTokens.N, u.CacheCreationInputTokens.N, u.CacheReadInputTokens.N, u.OutputTokens.N
	case "content_block_start":
		return a.start(ev)
	case "content_block_delta":
		return a.delta(ev)
	case "message_delta":
		a.reason = ev.Delta.StopReason
		u := ev.Usage // cumulative counts; input ones only where the API sends them
		if u.OutputTokens.Set {
			a.out = u.OutputTokens.N
		}
		if u.InputTokens.N > 0 {
			a.in = u.InputTokens.N
		}
		if u.CacheCreationInputTokens.N > 0 {
			a.cw = u.CacheCreationInputTokens.N
		}
		if u.CacheReadInputTokens.N > 0 {
			a.cr = u.CacheReadInputTokens.N
		}
		a.thinking = u.OutputTokensDetails.ThinkingTokens
	}
	return nil // content_block_stop, unknown events
}

func (a *anthropicStream) start(ev *anthEvent) error {
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

func (a *anthropicStream) delta(ev *anthEvent) error {
	b := a.blocks[ev.Index]
	if b == nil {
		return Malformed(fmt.Sprintf("anthropic: delta for block %d before its start", ev.Index))
	}
	d := ev.Delta
	want := anthDeltaBlock(d.Type)
	if want == "" {
		return nil // citations_delta and deltas this client does not use
	}
	if want != b.typ {
		return Malformed(Clip(fmt.Sprintf("anthropic: %s for a %s block", d.Type, b.typ)))
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

// anthDeltaBlock is the block type a delta type belongs to ("" : a delta
// this client does not use).
func anthDeltaBlock(delta string) string {
	switch delta {
	case "text_delta":
		return "text"
	case "input_json_delta":
		return "tool_use"
	case "thinking_delta", "signature_delta":
		return "thinking"
	}
	return ""
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
