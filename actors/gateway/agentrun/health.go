package agentrun

import "time"

// ProviderHealth is what the runtime knows of a provider's calls: each
// key's state and the last error.
type ProviderHealth struct {
	Keys        []KeyHealth `json:"key_states"`
	LastError   string      `json:"last_error,omitempty"`
	LastErrorAt *time.Time  `json:"last_error_at,omitempty"`
}

// KeyHealth is one key of a provider's pool, masked.
type KeyHealth struct {
	Key       string     `json:"key"`   // masked hint
	State     string     `json:"state"` // KeyReady, KeyCoolingDown, KeyRejected
	RetryAt   *time.Time `json:"retry_at,omitempty"`
	LastError string     `json:"last_error,omitempty"`
}

// Key states of KeyHealth.State.
const (
	// KeyReady: the key takes calls.
	KeyReady = "ready"
	// KeyCoolingDown: the key got a rate limit and waits until RetryAt.
	KeyCoolingDown = "cooling_down"
	// KeyRejected: the provider refused the key (401/403); it is set
	// aside until the provider is updated.
	KeyRejected = "rejected"
)
