package llm

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// Gemini's wire shapes (generateContent request and GenerateContentResponse,
// https://ai.google.dev/api/generate-content), only the fields this client
// sends or reads, and the conversion from the OpenAI chat shape.

type gemRequest struct {
	Contents          []gemContent  `json:"contents"`
	SystemInstruction *gemContent   `json:"systemInstruction,omitempty"`
	Tools             []gemTool     `json:"tools,omitempty"`
	GenerationConfig  *gemGenConfig `json:"generationConfig,omitempty"`
}

type gemContent struct {
	Role  string    `json:"role,omitempty"`
	Parts []gemPart `json:"parts"`
}

// gemPart is one part of a content: text (a thought summary when Thought),
// a function call or a function response. ThoughtSignature is opaque
// base64, passed back exactly as received.
type gemPart struct {
	Text             string       `json:"text,omitempty"`
	Thought          bool         `json:"thought,omitempty"`
	ThoughtSignature string       `json:"thoughtSignature,omitempty"`
	FunctionCall     *gemCall     `json:"functionCall,omitempty"`
	FunctionResponse *gemCallResp `json:"functionResponse,omitempty"`
}

type gemCall struct {
	// ID is read when the API sets it, never sent (optional, and absent
	// from most answers).
	ID   string          `json:"id,omitempty"`
	Name string          `json:"name"`
	Args json.RawMessage `json:"args,omitempty"`
}

type gemCallResp struct {
	Name     string          `json:"name"`
	Response gemRespContents `json:"response"`
}

type gemRespContents struct {
	Content string `json:"content"`
}

type gemTool struct {
	FunctionDeclarations []gemFuncDecl `json:"functionDeclarations"`
}

type gemFuncDecl struct {
	Name        string         `json:"name"`
	Description string         `json:"description,omitempty"`
	Parameters  map[string]any `json:"parameters,omitempty"`
}

type gemGenConfig struct {
	MaxOutputTokens int             `json:"maxOutputTokens,omitempty"`
	ThinkingConfig  *gemThinkConfig `json:"thinkingConfig,omitempty"`
}

type gemThinkConfig struct {
	ThinkingBudget  *int `json:"thinkingBudget,omitempty"`
	IncludeThoughts bool `json:"includeThoughts,omitempty"`
}

// gemResponse is one GenerateContentResponse: the whole answer, or one
// chunk of a stream. Error is set on a mid-stream error chunk.
type gemResponse struct {
	Candidates     []gemCandidate `json:"candidates"`
	PromptFeedback *struct {
		BlockReason        string `json:"blockReason"`
		BlockReasonMessage string `json:"blockReasonMessage"`
	} `json:"promptFeedback"`
	UsageMetadata *gemUsage `json:"usageMetadata"`
	Error         *gemError `json:"error"`
}

type gemCandidate struct {
	Content      gemContent `json:"content"`
	FinishReason string     `json:"finishReason"`
}

type gemUsage struct {
	PromptTokenCount        int64 `json:"promptTokenCount"`
	CandidatesTokenCount    int64 `json:"candidatesTokenCount"`
	CachedContentTokenCount int64 `json:"cachedContentTokenCount"`
	ThoughtsTokenCount      int64 `json:"thoughtsTokenCount"`
}

type gemError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
	Status  string `json:"status"`
	Details []struct {
		Type       string `json:"@type"`
		RetryDelay string `json:"retryDelay"`
	} `json:"details"`
}

// retryAfter is the wait a google.rpc.RetryInfo detail asks for (0: none),
// capped at an hour like RetryAfter's.
func (e *gemError) retryAfter() time.Duration {
	for _, d := range e.Details {
		if strings.HasSuffix(d.Type, "google.rpc.RetryInfo") {
			if v, err := time.ParseDuration(d.RetryDelay); err == nil {
				return min(max(v, 0), time.Hour)
			}
		}
	}
	return 0
}

// gemBuild converts req into a generateContent body. System messages are
// joined into systemInstruction; user and tool messages become user
// contents, assistant messages model contents, consecutive same-role
// turns merged into one. A tool result becomes a functionResponse part
// named like the assistant call whose id it carries.
func gemBuild(req Request, s geminiSettings) (*gemRequest, error) {
	out := &gemRequest{Contents: []gemContent{}}
	var system []string
	names := map[string]string{} // tool call id → function name
	for _, m := range req.Messages {
		switch m.Role {
		case "system", "developer": // developer: OpenAI's newer name for it
			if m.Content != "" {
				system = append(system, m.Content)
			}
		case "user":
			out.add("user", textPart(m.Content)...)
		case "assistant":
			out.add("model", modelParts(m, names)...)
		case "tool":
			name, ok := names[m.ToolCallID]
			if !ok {
				return nil, fmt.Errorf("tool result %q answers no earlier tool call", m.ToolCallID)
			}
			out.add("user", gemPart{FunctionResponse: &gemCallResp{Name: name, Response: gemRespContents{Content: m.Content}}})
		default:
			return nil, fmt.Errorf("unknown message role %q", m.Role)
		}
	}
	if len(out.Contents) == 0 || out.Contents[0].Role != "user" {
		// The API wants the conversation to open with a user turn.
		out.Contents = append([]gemContent{{Role: "user", Parts: []gemPart{{Text: "(conversation start)"}}}}, out.Contents...)
	}
	if len(system) > 0 {
		out.SystemInstruction = &gemContent{Parts: []gemPart{{Text: strings.Join(system, "\n\n")}}}
	}
	if len(req.Tools) > 0 {
		decls := make([]gemFuncDecl, 0, len(req.Tools))
		for _, t := range req.Tools {
			params, err := gemSchema(t.Function.Parameters)
			if err != nil {
				return nil, fmt.Errorf("tool %q: %w", t.Function.Name, err)
			}
			decls = append(decls, gemFuncDecl{Name: t.Function.Name, Description: t.Function.Description, Parameters: params})
		}
		out.Tools = []gemTool{{FunctionDeclarations: decls}}
	}
	out.GenerationConfig = s.generationConfig(req.MaxTokens)
	return out, nil
}

// add appends parts to the last content when it has role, else opens a
// new content; no content is ever left without parts.
func (r *gemRequest) add(role string, parts ...gemPart) {
	if len(parts) == 0 {
		return
	}
	if n := len(r.Contents); n > 0 && r.Contents[n-1].Role == role {
		r.Contents[n-1].Parts = append(r.Contents[n-1].Parts, parts...)
		return
	}
	r.Contents = append(r.Contents, gemContent{Role: role, Parts: parts})
}

func textPart(s string) []gemPart {
	if s == "" {
		return nil
	}
	return []gemPart{{Text: s}}
}

// modelParts is an assistant message as model parts: its text and its
// function calls, with the thought signatures of its Thinking put back
// where gemAnswer found them (see gemAnswer). Thought summaries (a
// Thinking with Text) are not sent back: the API does not need them, and
// one may come from another provider (Anthropic's thinking, after a
// fallback) whose signature Gemini would refuse.
func modelParts(m Message, names map[string]string) []gemPart {
	var parts []gemPart
	var bare []string
	for _, t := range m.Thinking {
		if sig, ok := strings.CutPrefix(t.Signature, GeminiSignaturePrefix); ok && t.Text == "" && t.Redacted == "" {
			bare = append(bare, sig)
		}
	}
	if m.Content != "" {
		p := gemPart{Text: m.Content}
		if len(m.ToolCalls) == 0 && len(bare) > 0 {
			p.ThoughtSignature = bare[0]
		}
		parts = append(parts, p)
	}
	for i, c := range m.ToolCalls {
		names[c.ID] = c.Function.Name
		p := gemPart{FunctionCall: &gemCall{Name: c.Function.Name, Args: argsObject(c.Function.Arguments)}}
		switch {
		case i < len(bare):
			p.ThoughtSignature = bare[i]
		case i == 0:
			// Calls Gemini did not make (another provider's, a client's
			// own history) carry the documented dummy signature, which
			// Gemini 3 accepts in place of the one it requires.
			p.ThoughtSignature = GeminiSkipSignature
		}
		parts = append(parts, p)
	}
	return parts
}

// GeminiSignaturePrefix starts every Thinking.Signature this client
// returns: Gemini's thoughtSignature follows it. Other clients can tell a
// Gemini signature from their own by it (and must not send it to their
// provider); this client sends back only signatures that carry it.
const GeminiSignaturePrefix = "gemini:"

// GeminiSkipSignature is the dummy thoughtSignature the Gemini API
// documents for function calls it did not produce itself.
const GeminiSkipSignature = "skip_thought_signature_validator"

// argsObject is a call's arguments as the JSON object functionCall.args
// must be: "" or anything but an object reads as {}.
func argsObject(s string) json.RawMessage {
	b := bytes.TrimSpace([]byte(s))
	if len(b) == 0 || b[0] != '{' || !json.Valid(b) {
		return json.RawMessage("{}")
	}
	return b
}

// gemAnswer assembles a Result from one whole GenerateContentResponse or
// from every chunk of a stream.
//
// Thought signatures (each prefixed with GeminiSignaturePrefix): a thought
// part's signature stays with its text in a Thinking (kept for the
// record, not sent back); a signature on an answer part becomes a
// Thinking with only Signature. With function calls only the calls'
// signatures are kept, the n-th such Thinking going back on the n-th call
// (Gemini signs the first call of each step); without calls the answer's
// last signature is kept and goes back on the text.
type gemAnswer struct {
	res       Result
	size, max int
	finish    string
	blocked   string
	candidate bool
	textSig   string
	callSigs  []string
	// text and the open thought grow in builders: a stream of many small
	// deltas must not copy the answer at each one.
	text       strings.Builder
	thought    strings.Builder
	thoughtSig string
	inThought  bool
}

// add takes one response (or chunk), passing text on to onDelta.
func (a *gemAnswer) add(r *gemResponse, onDelta OnDelta) error {
	if r.Error != nil {
		e := StreamError(r.Error.Status, r.Error.Message)
		e.RetryAfter = r.Error.retryAfter()
		return e
	}
	if r.UsageMetadata != nil {
		u := r.UsageMetadata
		a.res.PromptTokens = u.PromptTokenCount
		a.res.CacheReadTokens = u.CachedContentTokenCount
		a.res.CompletionTokens = u.CandidatesTokenCount + u.ThoughtsTokenCount
		a.res.ReasoningTokens = u.ThoughtsTokenCount
	}
	if r.PromptFeedback != nil && r.PromptFeedback.BlockReason != "" {
		a.blocked = r.PromptFeedback.BlockReason
		if m := r.PromptFeedback.BlockReasonMessage; m != "" {
			a.blocked += ": " + m
		}
	}
	if len(r.Candidates) == 0 {
		return nil
	}
	a.candidate = true
	c := &r.Candidates[0]
	if c.FinishReason != "" {
		a.finish = c.FinishReason
	}
	for i := range c.Content.Parts {
		if err := a.part(&c.Content.Parts[i], onDelta); err != nil {
			return err
		}
	}
	return nil
}

func (a *gemAnswer) part(p *gemPart, onDelta OnDelta) error {
	switch {
	case p.Thought:
		a.inThought = true
		a.thought.WriteString(p.Text)
		if p.ThoughtSignature != "" {
			a.thoughtSig = p.ThoughtSignature
		}
		return a.grow(len(p.Text) + len(p.ThoughtSignature))
	case p.FunctionCall != nil:
		a.closeThought()
		args := "{}"
		if b := bytes.TrimSpace(p.FunctionCall.Args); len(b) > 0 && !bytes.Equal(b, []byte("null")) {
			args = string(b)
		}
		id := p.FunctionCall.ID
		if id == "" {
			id = gemCallID()
		}
		a.res.ToolCalls = append(a.res.ToolCalls, ToolCall{ID: id, Type: "function", Function: ToolFunction{Name: p.FunctionCall.Name, Arguments: args}})
		if p.ThoughtSignature != "" {
			a.callSigs = append(a.callSigs, p.ThoughtSignature)
		}
		return a.grow(len(id) + len(p.FunctionCall.Name) + len(args) + len(p.ThoughtSignature))
	default:
		a.closeThought()
		if p.ThoughtSignature != "" {
			a.textSig = p.ThoughtSignature
		}
		if p.Text == "" {
			return a.grow(len(p.ThoughtSignature))
		}
		a.text.WriteString(p.Text)
		if err := a.grow(len(p.Text) + len(p.ThoughtSignature)); err != nil {
			return err
		}
		if onDelta != nil {
			return onDelta(p.Text)
		}
		return nil
	}
}

// closeThought ends the thought being read, if any, as a Thinking.
func (a *gemAnswer) closeThought() {
	if !a.inThought {
		return
	}
	t := Thinking{Text: a.thought.String()}
	if a.thoughtSig != "" {
		t.Signature = GeminiSignaturePrefix + a.thoughtSig
	}
	a.res.Thinking = append(a.res.Thinking, t)
	a.thought.Reset()
	a.thoughtSig, a.inThought = "", false
}

// grow counts n more answer bytes against max.
func (a *gemAnswer) grow(n int) error {
	a.size += n
	if a.size > a.max {
		return TooLarge(a.max)
	}
	return nil
}

// result finishes the answer: a blocked prompt or an answer without any
// candidate is an *Error, the finish reason becomes OpenAI's.
func (a *gemAnswer) result() (Result, error) {
	if !a.candidate {
		if a.blocked != "" {
			return Result{}, &Error{Kind: KindStatus, Status: 400, Type: "PROMPT_BLOCKED", Message: Clip("gemini: prompt blocked: " + a.blocked)}
		}
		return Result{}, Malformed("gemini: answer without candidates")
	}
	a.closeThought()
	a.res.Content = a.text.String()
	if a.finish == "MALFORMED_FUNCTION_CALL" && a.res.Content == "" && len(a.res.ToolCalls) == 0 {
		return Result{}, &Error{Kind: KindMalformed, Type: a.finish, Message: "gemini: the model produced a malformed function call"}
	}
	if len(a.res.ToolCalls) > 0 {
		for _, s := range a.callSigs {
			a.res.Thinking = append(a.res.Thinking, Thinking{Signature: GeminiSignaturePrefix + s})
		}
	} else if a.textSig != "" {
		a.res.Thinking = append(a.res.Thinking, Thinking{Signature: GeminiSignaturePrefix + a.textSig})
	}
	a.res.FinishReason = gemFinish(a.finish, len(a.res.ToolCalls) > 0)
	return a.res, nil
}

// gemFinish maps Gemini's finishReason to OpenAI's finish_reason.
func gemFinish(reason string, calls bool) string {
	switch reason {
	case "MAX_TOKENS":
		return "length"
	case "SAFETY", "RECITATION", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII", "IMAGE_SAFETY", "IMAGE_PROHIBITED_CONTENT":
		return "content_filter"
	}
	if calls {
		return "tool_calls"
	}
	return "stop"
}
