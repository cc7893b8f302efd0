package agentrun

import (
	"errors"
	"fmt"
	"time"

	"gatehouse/actors/gateway/agentrun/llm"
)

// Errors of Prepare and Execute. Transports map them (httpapi/gateway:
// the HTTP envelope, the SSE error event); nothing here knows HTTP.
var (
	// ErrAgentNotFound: no agent has the id or agent_key asked for.
	ErrAgentNotFound = errors.New("runtime: agent not found")
	// ErrAgentDisabled: the agent's status is not active.
	ErrAgentDisabled = errors.New("runtime: agent disabled")
	// ErrProviderDisabled: the agent's provider is disabled.
	ErrProviderDisabled = errors.New("runtime: provider disabled")
	// ErrAgentTimeout: the run passed its agent's time limit; the error
	// is a *TimeoutError.
	ErrAgentTimeout = errors.New("runtime: agent timed out")
	// ErrProvider: the provider failed or could not be reached; the error
	// is a *ProviderError.
	ErrProvider = errors.New("runtime: provider failed")
)

// TimeoutError is a run that passed its agent's time limit.
type TimeoutError struct {
	// Seconds is the agent's timeout_seconds.
	Seconds int
}

func (e *TimeoutError) Error() string {
	return fmt.Sprintf("%v after %d s", ErrAgentTimeout, e.Seconds)
}

// Is makes errors.Is(err, ErrAgentTimeout) true.
func (e *TimeoutError) Is(target error) bool { return target == ErrAgentTimeout }

// ProviderError is a failed call to an agent's provider. Detail is safe
// to show to the client: it never holds the credential or the upstream's
// body.
type ProviderError struct {
	Detail string
	// RetryAfter, when > 0, is when a provider of the agent is ready
	// again: no call was made, every provider was cooling down.
	RetryAfter time.Duration
	// cause is the provider client's error, when there is one.
	cause *llm.Error
}

// Unwrap is the provider client's *llm.Error, if any (nil otherwise).
func (e *ProviderError) Unwrap() error {
	if e.cause == nil {
		return nil
	}
	return e.cause
}

// Error is "provider: " and the detail, as run traces show it.
func (e *ProviderError) Error() string { return "provider: " + e.Detail }

// Is makes errors.Is(err, ErrProvider) true.
func (e *ProviderError) Is(target error) bool { return target == ErrProvider }

func providerError(detail string) error { return &ProviderError{Detail: detail} }
