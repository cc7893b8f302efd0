// Package llm holds the gateway's provider clients: one per provider type
// (openai_compat and its presets, azure_openai, anthropic_native,
// gemini_native, bedrock, ollama, echo), each turning one completion
// request into the provider's own wire format and its answer, streamed or
// whole, back into a Result. It knows nothing of agents, retries, key
// pools or fallbacks: the runtime (package agentrun) builds those on top of
// Client.
package llm

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"time"
)

// Message is one chat message sent to a provider: a system, user or
// assistant message, an assistant's tool calls, or a tool's result. It is
// the OpenAI chat shape; each client converts it to its provider's.
type Message struct {
	Role       string     `json:"role"` // system, user, assistant, tool
	Content    string     `json:"content"`
	ToolCalls  []ToolCall `json:"tool_calls,omitempty"`
	ToolCallID string     `json:"tool_call_id,omitempty"`
	// Thinking is an assistant message's reasoning blocks exactly as the
	// provider returned them (Anthropic requires them back, unchanged and
	// with their signatures, within a tool loop). Never shown to clients.
	Thinking []Thinking `json:"-"`
}

// Thinking is one reasoning block of an answer: its text and signature,
// or, for a redacted block, its opaque data.
type Thinking struct {
	Text      string `json:"thinking,omitempty"`
	Signature string `json:"signature,omitempty"`
	// Redacted is a redacted_thinking block's data (Text is then "").
	Redacted string `json:"data,omitempty"`
}

// ToolCall is a call the model asked for (OpenAI tool_calls). Arguments
// is a JSON object as a string ("" reads as {}).
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

// ToolSpec is a tool as the provider is told about it (OpenAI's shape).
type ToolSpec struct {
	Type     string       `json:"type"` // "function"
	Function ToolSpecFunc `json:"function"`
}

// ToolSpecFunc is a tool's name, description and JSON Schema.
type ToolSpecFunc struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters"`
}

// Request is one completion asked of a provider.
type Request struct {
	Model    string
	Messages []Message
	Tools    []ToolSpec
	// MaxTokens bounds the answer; 0 lets the client use its provider's
	// settings.max_tokens or its default (Anthropic requires one).
	MaxTokens int
	// ToolsJSON, when not nil, is EncodeTools(Tools), encoded once by a
	// caller that sends the same tools call after call: the
	// OpenAI-shaped clients (openai_compat, its presets, azure_openai)
	// put these bytes in the body instead of encoding Tools again. The
	// other clients read Tools.
	ToolsJSON []byte
}

// Result is a finished completion: the answer, or the tool calls the
// model asks for before it answers, and the tokens it took.
//
// Token counts follow OpenAI's convention whatever the provider:
// PromptTokens counts every input token, cached or not (CacheReadTokens
// and CacheWriteTokens are the parts of it read from and written to the
// provider's prompt cache); CompletionTokens counts every output token,
// reasoning included (ReasoningTokens is that part). A count the provider
// does not report is 0; nothing is estimated.
type Result struct {
	Content          string
	ToolCalls        []ToolCall
	Thinking         []Thinking
	PromptTokens     int64
	CompletionTokens int64
	CacheReadTokens  int64
	CacheWriteTokens int64
	ReasoningTokens  int64
	// FinishReason is OpenAI's: stop, tool_calls, length, content_filter.
	FinishReason string
}

// OnDelta gets each piece of an answer's text as it arrives; an error
// stops the call and is returned by Complete unchanged.
type OnDelta func(string) error

// Client calls one provider with one credential. Its methods are safe for
// concurrent use.
type Client interface {
	// Complete runs one completion. With onDelta nil the answer is asked
	// for whole; otherwise it is streamed and each text delta passed on.
	// Errors: an *Error for anything the provider answered or failed to
	// answer, ctx's error once ctx is done, onDelta's error unchanged.
	Complete(ctx context.Context, req Request, onDelta OnDelta) (Result, error)
	// Models lists the models the provider's own API lists.
	Models(ctx context.Context) ([]Model, error)
	// Verify makes the cheapest authenticated call the provider has; nil
	// when the credential and the endpoint work. Errors as Complete's.
	Verify(ctx context.Context) error
}

// Model is one model a provider lists.
type Model struct {
	ID          string `json:"id"`
	DisplayName string `json:"display_name,omitempty"`
}

// Config is what a client is built from.
type Config struct {
	// Type is the provider type (an alias or preset already resolved by
	// Canonical).
	Type string
	// APIBase is the provider's api_base without a trailing slash; ""
	// takes the type's default.
	APIBase string
	// Key is one opened credential ("" when the provider has none). Never
	// log it.
	Key string
	// Settings is the provider's settings object (may be empty).
	Settings json.RawMessage
	// MaxAnswer bounds one answer: its text, tool calls and thinking, in
	// bytes. A larger answer fails with an *Error (KindMalformed).
	MaxAnswer int
	// HTTP is the shared client whose transport keeps the upstream pool;
	// clients never build transports of their own.
	HTTP *http.Client
}

// Factory builds a Client for cfg; an error means cfg's settings or base
// cannot work (checked again at create time by Validate).
type Factory func(cfg Config) (Client, error)

// TypeInfo describes one provider type.
type TypeInfo struct {
	// Name is the canonical type.
	Name string
	// DefaultBase is api_base when none is given ("" : api_base required).
	DefaultBase string
	// NeedsKey: calls fail without a credential.
	NeedsKey bool
	// New builds its client.
	New Factory
	// Validate checks settings (and base) at create/update; nil accepts
	// any settings object.
	Validate func(apiBase string, settings json.RawMessage) error
}

var (
	types   = map[string]TypeInfo{}
	aliases = map[string]string{}
)

// Register makes a provider type known; called from init in this
// package's files. Panics on a duplicate.
func Register(t TypeInfo, alias ...string) {
	if _, dup := types[t.Name]; dup {
		panic("llm: duplicate provider type " + t.Name)
	}
	types[t.Name] = t
	for _, a := range alias {
		aliases[a] = t.Name
	}
}

// Lookup returns the type named name, resolving aliases.
func Lookup(name string) (TypeInfo, bool) {
	if c, ok := aliases[name]; ok {
		name = c
	}
	t, ok := types[name]
	return t, ok
}

// Names lists every accepted provider_type, canonical names and aliases,
// sorted.
func Names() []string {
	out := make([]string, 0, len(types)+len(aliases))
	for n := range types {
		out = append(out, n)
	}
	for a := range aliases {
		out = append(out, a)
	}
	sort.Strings(out)
	return out
}

// New builds the client of cfg.Type (aliases resolved), with the type's
// default base when cfg.APIBase is "".
func New(cfg Config) (Client, error) {
	t, ok := Lookup(cfg.Type)
	if !ok {
		return nil, fmt.Errorf("llm: unknown provider type %q", cfg.Type)
	}
	cfg.Type = t.Name
	if cfg.APIBase == "" {
		cfg.APIBase = t.DefaultBase
	}
	if cfg.MaxAnswer <= 0 {
		cfg.MaxAnswer = DefaultMaxAnswer
	}
	if cfg.HTTP == nil {
		cfg.HTTP = http.DefaultClient
	}
	return t.New(cfg)
}

// DefaultMaxAnswer bounds an answer when Config.MaxAnswer is 0.
const DefaultMaxAnswer = 1 << 20

// DefaultMaxTokens is max_tokens where a provider requires one and
// neither the request nor settings.max_tokens give it.
const DefaultMaxTokens = 4096

// Error kinds: what went wrong, for retries and the trace.
const (
	// KindStatus: the provider answered with an error status (Status).
	KindStatus = "status"
	// KindUnreachable: no answer (refused, reset, timed out, DNS).
	KindUnreachable = "unreachable"
	// KindMalformed: an answer the client cannot read, or too large.
	KindMalformed = "malformed"
	// KindStream: the provider reported an error in the middle of a
	// stream (an SSE error event, an exception frame).
	KindStream = "stream"
)

// Error is a failed provider call. Message is safe to show a client: it
// never holds the credential or the upstream's body beyond the
// provider's own error type and message, truncated.
type Error struct {
	Kind string
	// Status is the HTTP status, 0 when there was none.
	Status int
	// Type is the provider's error type ("overloaded_error",
	// "RESOURCE_EXHAUSTED", "ThrottlingException"), "" if none.
	Type string
	// Message is a short, client-safe description.
	Message string
	// RetryAfter is how long the provider asked to wait (Retry-After,
	// retry-after-ms, Gemini's RetryInfo); 0 when it did not say.
	RetryAfter time.Duration
}

func (e *Error) Error() string {
	s := e.Message
	if e.Type != "" {
		s = e.Type + ": " + s
	}
	if e.Status != 0 {
		s = fmt.Sprintf("status %d: %s", e.Status, s)
	}
	return s
}

// Retryable reports whether the same call may succeed if tried again:
// 408, 409, 429, 5xx (Anthropic's 529 included), an unreachable provider,
// a stream error the provider marks as overload, rate limit or internal.
// 400, 401, 403, 404 and malformed answers are not.
func (e *Error) Retryable() bool {
	switch e.Kind {
	case KindUnreachable:
		return true
	case KindMalformed:
		return false
	case KindStream:
		switch e.Type {
		case "overloaded_error", "rate_limit_error", "api_error", "internal_error",
			"ThrottlingException", "ServiceUnavailableException", "InternalServerException",
			"ModelStreamErrorException", "RESOURCE_EXHAUSTED", "UNAVAILABLE", "INTERNAL", "server_error":
			return true
		}
		return false
	}
	return e.Status == 408 || e.Status == 409 || e.Status == 429 || e.Status >= 500
}

// KeyRejected reports whether the credential itself was refused (401,
// 403): a pool sets that key aside until the provider is updated.
func (e *Error) KeyRejected() bool { return e.Status == 401 || e.Status == 403 }

// RateLimited reports a 429 (or a throttling error): a pool cools that
// key down for RetryAfter.
func (e *Error) RateLimited() bool {
	return e.Status == 429 || e.Type == "rate_limit_error" || e.Type == "ThrottlingException" || e.Type == "RESOURCE_EXHAUSTED"
}
