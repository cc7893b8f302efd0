package agentrun

import (
	"errors"
	"fmt"

	"gatehouse/actors/gateway"
)

// Limits bound what one turn may bring in and what a provider may answer,
// so that a large message costs its sender, not everyone: the runtime
// refuses an oversized turn before it resolves anything, and stops
// reading a provider past its bound.
type Limits struct {
	// MaxMessageBytes caps a turn's new messages: the sum of their
	// contents, in bytes (a session's history is not counted). A turn
	// above it fails with ErrMessageTooLarge (413 over HTTP).
	MaxMessageBytes int
	// MaxAnswerBytes caps what one provider call may answer: the content
	// plus the tool calls' names and arguments, streamed or not. A
	// non-streaming answer's body may be twice that plus 64 KiB (JSON's
	// envelope and escapes). Past it the call fails with a
	// *ProviderError, and the rest is not read.
	MaxAnswerBytes int
}

// DefaultMaxMessageBytes and DefaultMaxAnswerBytes are DefaultLimits'.
const (
	DefaultMaxMessageBytes = 1 << 20
	DefaultMaxAnswerBytes  = 1 << 20
)

// DefaultLimits returns 1 MiB of message text per turn and 1 MiB of
// answer per provider call.
func DefaultLimits() Limits {
	return Limits{MaxMessageBytes: DefaultMaxMessageBytes, MaxAnswerBytes: DefaultMaxAnswerBytes}
}

// Validate names the first bad field.
func (l Limits) Validate() error {
	switch {
	case l.MaxMessageBytes < 1:
		return errors.New("runtime: MaxMessageBytes must be > 0")
	case l.MaxAnswerBytes < 1:
		return errors.New("runtime: MaxAnswerBytes must be > 0")
	}
	return nil
}

// ErrMessageTooLarge: a turn's messages hold more than MaxMessageBytes.
// It wraps gateway.ErrTooLarge, which the transports answer as such (413).
var ErrMessageTooLarge = fmt.Errorf("runtime: messages too large: %w", gateway.ErrTooLarge)

// SetLimits replaces DefaultLimits; call it before the first run.
func (rt *Runtime) SetLimits(l Limits) error {
	if err := l.Validate(); err != nil {
		return err
	}
	rt.limits = l
	rt.pools.maxAnswer = l.MaxAnswerBytes
	return nil
}

// checkSize refuses msgs whose contents exceed MaxMessageBytes.
func (rt *Runtime) checkSize(msgs []Message) error {
	n := 0
	for _, m := range msgs {
		n += len(m.Content)
	}
	if n > rt.limits.MaxMessageBytes {
		return fmt.Errorf("%w: %d bytes, the limit is %d", ErrMessageTooLarge, n, rt.limits.MaxMessageBytes)
	}
	return nil
}
