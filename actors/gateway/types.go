package gateway

import (
	"encoding/json"
	"slices"
	"time"

	"github.com/google/uuid"
)

// Scope is an API-key permission. Names follow the GoClaw ecosystem.
type Scope string

// The three scopes. Admin implies write, write implies read.
const (
	ScopeAdmin Scope = "operator.admin"
	ScopeWrite Scope = "operator.write"
	ScopeRead  Scope = "operator.read"
)

// Grants reports whether a holder of s may use an endpoint needing need.
func (s Scope) Grants(need Scope) bool {
	rank := map[Scope]int{ScopeRead: 1, ScopeWrite: 2, ScopeAdmin: 3}
	return rank[s] >= rank[need] && rank[need] > 0
}

// ValidScope reports whether s is one of the three scopes.
func ValidScope(s Scope) bool { return s == ScopeAdmin || s == ScopeWrite || s == ScopeRead }

// APIKey is a gateway API key as listed: the raw key is never kept, only
// its SHA-256 and a masked preview.
type APIKey struct {
	ID      uuid.UUID `json:"id"`
	Name    string    `json:"name"`
	Preview string    `json:"preview"`
	Hash    [32]byte  `json:"hash"`
	Scopes  []Scope   `json:"scopes"`
	// UserID is the user the key acts for: the only one for a read or
	// write key, the default (when no X-Gateway-User-Id is sent) for an
	// admin key. Empty for an admin key made without one, and for keys
	// made before keys were bound to users.
	UserID    string    `json:"user_id"`
	CreatedAt time.Time `json:"created_at"`
	ExpiresAt time.Time `json:"expires_at,omitzero"`
	RevokedAt time.Time `json:"revoked_at,omitzero"`
}

// Trusted reports whether the key may act for any user (operator.admin).
func (k *APIKey) Trusted() bool { return slices.Contains(k.Scopes, ScopeAdmin) }

// Active reports whether k authenticates at now.
func (k *APIKey) Active(now time.Time) bool { return activeAt(k.RevokedAt, k.ExpiresAt, now) }

func activeAt(revokedAt, expiresAt, now time.Time) bool {
	return revokedAt.IsZero() && (expiresAt.IsZero() || now.Before(expiresAt))
}

// NewAPIKey is a create request. ExpiresIn 0 means never.
type NewAPIKey struct {
	Name      string
	Scopes    []Scope
	ExpiresIn time.Duration
	// UserID binds the key to one user: required unless the scopes
	// include operator.admin (a trusted backend that may act for anyone).
	UserID string
}

// KeyAuth is what a successful API-key authentication yields.
type KeyAuth struct {
	ID     uuid.UUID
	Scopes []Scope
	// UserID is the key's user (see APIKey.UserID).
	UserID string
}

// Provider types the gateway itself names; every other type is one the
// provider clients (package llm) register, aliases and presets included.
const (
	ProviderOpenAICompat = "openai_compat"
	// ProviderEcho is offline and deterministic: for demos and tests only.
	ProviderEcho = "echo"
)

// Key pool bounds (ProviderInput.APIKeys).
const (
	// MaxProviderKeys is how many keys a provider's pool holds at most.
	MaxProviderKeys = 16
	// MaxProviderKeyBytes bounds one key of the pool.
	MaxProviderKeyBytes = 8 << 10
)

// Provider is an LLM endpoint. APIKeySealed is the AES-256-GCM sealed
// credential (bound to the provider id); it is opened only to call out.
type Provider struct {
	ID           uuid.UUID `json:"id"`
	Name         string    `json:"name"`
	DisplayName  string    `json:"display_name"`
	ProviderType string    `json:"provider_type"`
	APIBase      string    `json:"api_base"`
	// APIKeySealed is the credential sealed for the WAL; never serialized.
	APIKeySealed []byte `json:"-"`
	// APIKeyHint is the credential masked: "****" and its last four
	// characters, "****" when shorter than 12, "" when there is none.
	APIKeyHint string `json:"api_key"`
	// APIKeysSealed is the key pool (api_keys), each key sealed like
	// APIKeySealed; never serialized.
	APIKeysSealed [][]byte `json:"-"`
	// APIKeysHint masks the pool's keys, in order, as APIKeyHint does
	// (never nil).
	APIKeysHint []string        `json:"api_keys"`
	Enabled     bool            `json:"enabled"`
	Settings    json.RawMessage `json:"settings"` // a JSON object, {} when none
	CreatedAt   time.Time       `json:"created_at"`
	UpdatedAt   time.Time       `json:"updated_at"`
}

// ProviderInput creates or replaces a provider's fields. APIKey nil keeps
// the current credential on update; "" clears it. APIKeys nil keeps the
// key pool; an empty list clears it.
type ProviderInput struct {
	Name         string
	DisplayName  string
	ProviderType string
	APIBase      string
	APIKey       *string
	// APIKeys is the key pool: at most MaxProviderKeys keys, each
	// non-empty and at most MaxProviderKeyBytes.
	APIKeys  *[]string
	Enabled  bool
	Settings json.RawMessage
}

// Agent statuses.
const (
	AgentActive   = "active"
	AgentDisabled = "disabled"
	// AgentSummoning: its provider is writing its system prompt from its
	// description (other_config.description).
	AgentSummoning = "summoning"
	// AgentSummonFailed: summoning failed (summon_error says why);
	// POST /v1/agents/{id}/resummon retries.
	AgentSummonFailed = "summon_failed"
)

// Agent is a configured assistant: a provider, a model and a system prompt,
// owned by one gateway user and optionally shared with others.
type Agent struct {
	ID           uuid.UUID `json:"id"`
	AgentKey     string    `json:"agent_key"`
	DisplayName  string    `json:"display_name"`
	OwnerID      string    `json:"owner_id"`
	ProviderID   uuid.UUID `json:"provider_id"`
	Model        string    `json:"model"`
	SystemPrompt string    `json:"system_prompt"`
	Status       string    `json:"status"`
	// SummonError is why summoning failed (status summon_failed).
	SummonError       string           `json:"summon_error,omitempty"`
	OtherConfig       AgentOtherConfig `json:"other_config"`
	TimeoutSeconds    int              `json:"timeout_seconds"`
	MaxToolIterations int              `json:"max_tool_iterations"`
	IsDefault         bool             `json:"is_default"`
	SharedWith        []string         `json:"shared_with"` // never nil
	// Shares are SharedWith with each user's role.
	Shares []Share `json:"shares"`
	// Fallbacks are where a turn's call goes, in order, when the primary
	// provider fails after its retries or is cooling down (never nil).
	Fallbacks []Fallback `json:"fallbacks"`
	CreatedAt time.Time  `json:"created_at"`
	UpdatedAt time.Time  `json:"updated_at"`
}

// MaxFallbacks is how many fallbacks an agent names at most.
const MaxFallbacks = 8

// Fallback is one of an agent's fallbacks: a provider and a model.
type Fallback struct {
	ProviderID uuid.UUID `json:"provider_id"`
	// Provider is the provider's name (filled on read).
	Provider string `json:"provider"`
	Model    string `json:"model"`
}

// FallbackInput names a fallback: Provider is a provider's id or name.
type FallbackInput struct {
	Provider string `json:"provider"`
	Model    string `json:"model"`
}

// MaxAgentMaxTokens bounds AgentOtherConfig.MaxTokens.
const MaxAgentMaxTokens = 1_000_000

// AgentOtherConfig holds an agent's further settings.
type AgentOtherConfig struct {
	// Description is the summoning brief: an agent created with one and
	// no system prompt has its provider write the prompt from it.
	Description string `json:"description"`
	// MaxTokens bounds each answer of the agent's calls (max_tokens); 0
	// leaves it to the provider's settings or default.
	MaxTokens int `json:"max_tokens,omitempty"`
}

// ShareRole is what a user an agent is shared with may do.
type ShareRole string

// Share roles.
const (
	// ShareUser may read the agent and run it.
	ShareUser ShareRole = "user"
	// ShareOperator may also edit its system prompt.
	ShareOperator ShareRole = "operator"
)

// Share is one user an agent is shared with.
type Share struct {
	UserID string    `json:"user_id"`
	Role   ShareRole `json:"role"`
}

// CanUse reports whether user owns a or a is shared with user.
func (a *Agent) CanUse(user string) bool { return usableBy(a.OwnerID, a.SharedWith, user) }

func usableBy(owner string, sharedWith []string, user string) bool {
	return owner == user || slices.Contains(sharedWith, user)
}

// AgentInput creates or updates an agent. Provider is a provider's name or
// id. Nil fields keep their value on update.
type AgentInput struct {
	AgentKey    *string `json:"agent_key,omitempty"`
	DisplayName *string `json:"display_name,omitempty"`
	// Provider is the provider's name or id.
	Provider       *string   `json:"provider,omitempty"`
	Model          *string   `json:"model,omitempty"`
	SystemPrompt   *string   `json:"system_prompt,omitempty"`
	Status         *string   `json:"status,omitempty"`
	TimeoutSeconds *int      `json:"timeout_seconds,omitempty"`
	SharedWith     *[]string `json:"shared_with,omitempty"`
	// OtherConfig.Description is the summoning brief (see AgentOtherConfig).
	OtherConfig       *AgentOtherConfig `json:"other_config,omitempty"`
	MaxToolIterations *int              `json:"max_tool_iterations,omitempty"`
	// IsDefault makes the agent the one runs use when they name none (the
	// seed's "agent named default"), for its owner and users it is shared
	// with.
	IsDefault *bool `json:"is_default,omitempty"`
	// Fallbacks replaces the agent's fallbacks (at most MaxFallbacks; an
	// empty list clears them).
	Fallbacks *[]FallbackInput `json:"fallbacks,omitempty"`
}

// onlyPrompt reports whether in changes the system prompt and nothing else
// (what an operator may do).
func (in AgentInput) onlyPrompt() bool {
	return in.SystemPrompt != nil && in.AgentKey == nil && in.DisplayName == nil && in.Provider == nil &&
		in.Model == nil && in.Status == nil && in.TimeoutSeconds == nil && in.SharedWith == nil &&
		in.OtherConfig == nil && in.MaxToolIterations == nil && in.IsDefault == nil && in.Fallbacks == nil
}

// Span is one timed step of a run: an LLM call, a tool call, a
// delegation. ParentID is "" for a top-level step.
//
// Token counts follow OpenAI's convention (see llm.Result): PromptTokens
// counts every input token, CacheReadTokens and CacheWriteTokens the parts
// of it read from and written to the provider's prompt cache;
// CompletionTokens every output token, ReasoningTokens the part spent
// reasoning. A count the provider does not report is 0.
type Span struct {
	ID           string `json:"id"`
	ParentID     string `json:"parent_id,omitempty"`
	Name         string `json:"name"`
	Kind         string `json:"kind"` // SpanLLM, SpanTool, SpanDelegation
	Model        string `json:"model,omitempty"`
	Provider     string `json:"provider,omitempty"`
	ProviderType string `json:"provider_type,omitempty"`
	// Attempt is the 1-based attempt of an LLM call within its turn's
	// call (retries and fallbacks each add one); 0 when not counted.
	Attempt          int       `json:"attempt,omitempty"`
	StartedAt        time.Time `json:"started_at"`
	DurationMs       int64     `json:"duration_ms"`
	PromptTokens     int64     `json:"prompt_tokens"`
	CompletionTokens int64     `json:"completion_tokens"`
	CacheReadTokens  int64     `json:"cache_read_tokens,omitempty"`
	CacheWriteTokens int64     `json:"cache_write_tokens,omitempty"`
	ReasoningTokens  int64     `json:"reasoning_tokens,omitempty"`
	Status           string    `json:"status"`
	Error            string    `json:"error,omitempty"`
	InputPreview     string    `json:"input_preview,omitempty"`
	OutputPreview    string    `json:"output_preview,omitempty"`
	// CostNano is what an LLM call cost in nano-USD (docs/pricing.md):
	// the gateway prices it when it records the run. CostUSD shows it;
	// PriceKnown is false for a model without a price (it costs 0), and
	// absent on spans that made no call and in runs recorded before prices.
	CostNano   int64   `json:"-"`
	CostUSD    float64 `json:"cost_usd"`
	PriceKnown *bool   `json:"price_known,omitempty"`
}

// Span kinds.
const (
	SpanLLM        = "llm"
	SpanTool       = "tool"
	SpanDelegation = "delegation"
)

// Run statuses.
const (
	RunOK      = "ok"
	RunFailed  = "failed"
	RunTimeout = "timeout"
)

// Trace is the record of one agent run. Previews are truncated and
// redacted by whoever records the run (the runtime).
type Trace struct {
	ID         string    `json:"id"`
	AgentID    uuid.UUID `json:"agent_id"`
	UserID     string    `json:"user_id"`
	SessionKey string    `json:"session_key,omitempty"`
	Endpoint   string    `json:"endpoint"`          // the entry point: the trace's name
	Channel    string    `json:"channel,omitempty"` // http, ws, webhook, internal
	// Provider, ProviderType and Model are those that answered (a
	// fallback's when the primary failed).
	Provider      string    `json:"provider,omitempty"`
	ProviderType  string    `json:"provider_type,omitempty"`
	Model         string    `json:"model,omitempty"`
	Status        string    `json:"status"`
	Error         string    `json:"error,omitempty"`
	StartedAt     time.Time `json:"started_at"`
	DurationMs    int64     `json:"duration_ms"`
	InputPreview  string    `json:"input_preview,omitempty"`
	OutputPreview string    `json:"output_preview,omitempty"`
	Spans         []Span    `json:"spans"`
	// CostNano is the run's cost, the sum of its spans' (CostUSD shows
	// it); PriceKnown is false when one of its calls had no price.
	CostNano   int64   `json:"-"`
	CostUSD    float64 `json:"cost_usd"`
	PriceKnown *bool   `json:"price_known,omitempty"`
	// APIKeyID is the gateway API key the run was called with (absent:
	// the gateway token, open mode, a console session, a channel).
	APIKeyID uuid.UUID `json:"api_key_id,omitzero"`
}

// Tokens sums the spans' prompt and completion tokens.
func (t Trace) Tokens() (prompt, completion int64) {
	c := t.TokenCounts()
	return c.Prompt, c.Completion
}

// TokenCounts are the five token counts of a span, a trace or usage (see
// Span for their meaning).
type TokenCounts struct {
	Prompt, Completion    int64
	CacheRead, CacheWrite int64
	Reasoning             int64
}

// Counts is the span's token counts.
func (s Span) Counts() TokenCounts {
	return TokenCounts{Prompt: s.PromptTokens, Completion: s.CompletionTokens,
		CacheRead: s.CacheReadTokens, CacheWrite: s.CacheWriteTokens, Reasoning: s.ReasoningTokens}
}

// Add returns c plus d.
func (c TokenCounts) Add(d TokenCounts) TokenCounts {
	return TokenCounts{Prompt: c.Prompt + d.Prompt, Completion: c.Completion + d.Completion,
		CacheRead: c.CacheRead + d.CacheRead, CacheWrite: c.CacheWrite + d.CacheWrite, Reasoning: c.Reasoning + d.Reasoning}
}

// TokenCounts sums the spans' token counts, all five kinds.
func (t Trace) TokenCounts() TokenCounts {
	var c TokenCounts
	for _, s := range t.Spans {
		c = c.Add(s.Counts())
	}
	return c
}

// UsageRow is the token usage of one agent for one user on one UTC day.
type UsageRow struct {
	Day              string    `json:"day"` // 2006-01-02
	AgentID          uuid.UUID `json:"agent_id"`
	UserID           string    `json:"user_id"`
	Runs             int64     `json:"runs"`
	PromptTokens     int64     `json:"prompt_tokens"`
	CompletionTokens int64     `json:"completion_tokens"`
	CacheReadTokens  int64     `json:"cache_read_tokens,omitempty"`
	CacheWriteTokens int64     `json:"cache_write_tokens,omitempty"`
	ReasoningTokens  int64     `json:"reasoning_tokens,omitempty"`
	// CostNano is the runs' cost in nano-USD; CostUSD shows it.
	CostNano int64   `json:"-"`
	CostUSD  float64 `json:"cost_usd"`
}

// DefaultMaxToolIterations bounds an agent's tool loop unless it sets its
// own max_tool_iterations.
const DefaultMaxToolIterations = 20
