package webhook

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"gatehouse/actors/gateway"
	"gatehouse/actors/gateway/runtime"
)

// ErrUnauthorized is an inbound request whose timestamp, signature or
// novelty did not check out; it runs nothing.
var ErrUnauthorized = errors.New("webhook: bad or replayed signature")

// maxSenderID bounds a sender's id.
const maxSenderID = 80

// Config configures delivery.
type Config struct {
	// CallbackRetry is the first wait before retrying a failed callback;
	// it doubles, CallbackAttempts times in all.
	CallbackRetry    time.Duration
	CallbackAttempts int
	// CallbackTimeout bounds one callback request.
	CallbackTimeout time.Duration
	// Code names a failed turn's error in the callback body (the
	// transport's error code, e.g. AGENT_TIMEOUT); nil sends "INTERNAL".
	Code func(error) string
}

// DefaultConfig tries callbacks 5 times, 1 s apart at first, 10 s each.
func DefaultConfig() Config {
	return Config{CallbackRetry: time.Second, CallbackAttempts: 5, CallbackTimeout: 10 * time.Second}
}

// Validate names the first bad field.
func (c Config) Validate() error {
	switch {
	case c.CallbackRetry <= 0 || c.CallbackAttempts < 1:
		return errors.New("webhook: CallbackRetry must be > 0 and CallbackAttempts >= 1")
	case c.CallbackTimeout <= 0:
		return errors.New("webhook: CallbackTimeout must be > 0")
	}
	return nil
}

// Channels is what the webhook channel needs from the registry. Safe for
// concurrent use.
type Channels interface {
	// ChannelCredentials opens an instance's credentials (to verify and
	// sign its traffic only); gateway.ErrNotFound if there is none.
	ChannelCredentials(ctx context.Context, ref string) (gateway.ChannelInstance, map[string]string, error)
	// Now is the gateway's clock.
	Now() time.Time
}

// Turner runs a turn: the agent runtime.
type Turner interface {
	Turn(ctx context.Context, p gateway.Principal, req runtime.TurnRequest) (runtime.TurnResult, error)
}

var (
	_ Channels = (*gateway.Gateway)(nil)
	_ Turner   = (*runtime.Runtime)(nil)
)

// Service is the webhook channel. Safe for concurrent use.
type Service struct {
	cfg     Config
	chans   Channels
	clock   interface{ Now() time.Time }
	turns   Turner
	replays *replayCache
	lg      *slog.Logger

	bgCtx  context.Context // async turns and callbacks end with it at Close
	bgStop context.CancelFunc
	bg     sync.WaitGroup
}

// New returns the webhook channel over the registry and the runtime. lg
// nil discards logs.
func New(cfg Config, chans Channels, turns Turner, lg *slog.Logger) (*Service, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if lg == nil {
		lg = slog.New(slog.DiscardHandler)
	}
	s := &Service{cfg: cfg, chans: chans, clock: chans, turns: turns, replays: newReplayCache(), lg: lg.With("component", "webhook")}
	s.bgCtx, s.bgStop = context.WithCancel(context.Background())
	return s, nil
}

// Close cancels the async turns and pending callbacks and waits for them
// until ctx is done (then it returns ctx's error).
func (s *Service) Close(ctx context.Context) error {
	s.bgStop()
	done := make(chan struct{})
	go func() { s.bg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("close webhooks: %w", ctx.Err())
	}
}

// Inbound is a verified inbound request's instance.
type Inbound struct {
	Instance gateway.ChannelInstance
	secret   string
}

// Verify finds enabled webhook instance ref and checks the request's
// timestamp and signature over body. Errors: gateway.ErrNotFound (no such
// enabled webhook instance), ErrUnauthorized, the registry's.
func (s *Service) Verify(ctx context.Context, ref, timestamp, signature string, body []byte) (Inbound, error) {
	c, creds, err := s.chans.ChannelCredentials(ctx, ref)
	switch {
	case err != nil && !errors.Is(err, gateway.ErrNotFound):
		return Inbound{}, fmt.Errorf("webhook %q: %w", ref, err)
	case err != nil || !c.Enabled || c.ChannelType != gateway.ChannelWebhook:
		return Inbound{}, fmt.Errorf("webhook %q: %w", ref, gateway.ErrNotFound)
	}
	if err := s.verify(c.ID.String(), creds["secret"], timestamp, signature, body); err != nil {
		return Inbound{}, err
	}
	return Inbound{Instance: c, secret: creds["secret"]}, nil
}
