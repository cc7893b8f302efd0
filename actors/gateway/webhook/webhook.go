package webhook

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/google/uuid"

	"gatehouse/actors/gateway"
	"gatehouse/actors/gateway/agentrun"
)

var (
	// ErrUnauthorized is an inbound request whose timestamp, signature or
	// novelty did not check out; it runs nothing.
	ErrUnauthorized = errors.New("webhook: bad or replayed signature")
	// ErrBusy is an async message refused because its instance has
	// Config.MaxInFlight messages in flight already; it runs nothing.
	ErrBusy = errors.New("webhook: too many async messages in flight")
)

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
	// MaxInFlight bounds the async messages of one instance accepted and
	// not finished (cmd: gateway.webhook_max_in_flight): a message is in
	// flight from its 202 until its callback is delivered or abandoned,
	// its retries included. Beyond it a message is ErrBusy.
	MaxInFlight int
}

// DefaultMaxInFlight is Config.MaxInFlight's default.
const DefaultMaxInFlight = 16

// DefaultConfig tries callbacks 5 times, 1 s apart at first, 10 s each,
// and holds up to 16 async messages in flight per instance.
func DefaultConfig() Config {
	return Config{CallbackRetry: time.Second, CallbackAttempts: 5, CallbackTimeout: 10 * time.Second, MaxInFlight: DefaultMaxInFlight}
}

// Validate names the first bad field.
func (c Config) Validate() error {
	switch {
	case c.CallbackRetry <= 0 || c.CallbackAttempts < 1:
		return errors.New("webhook: CallbackRetry must be > 0 and CallbackAttempts >= 1")
	case c.CallbackTimeout <= 0:
		return errors.New("webhook: CallbackTimeout must be > 0")
	case c.MaxInFlight < 1:
		return errors.New("webhook: MaxInFlight must be >= 1")
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
	Turn(ctx context.Context, p gateway.Principal, req agentrun.TurnRequest) (agentrun.TurnResult, error)
}

var (
	_ Channels = (*gateway.Gateway)(nil)
	_ Turner   = (*agentrun.Runtime)(nil)
)

// Service is the webhook channel. Safe for concurrent use.
type Service struct {
	cfg     Config
	chans   Channels
	clock   interface{ Now() time.Time }
	turns   Turner
	replays *replayCache
	lg      *slog.Logger

	mu       sync.Mutex
	inFlight map[uuid.UUID]int // async messages of each instance accepted and not finished

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
	s := &Service{cfg: cfg, chans: chans, clock: chans, turns: turns, replays: newReplayCache(), lg: lg.With("component", "webhook"),
		inFlight: map[uuid.UUID]int{}}
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

// admit takes one of instance id's MaxInFlight async slots: ErrBusy when
// none is free.
func (s *Service) admit(id uuid.UUID, name string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.inFlight[id] >= s.cfg.MaxInFlight {
		return fmt.Errorf("instance %s: %d async messages in flight (gateway.webhook_max_in_flight): %w", name, s.cfg.MaxInFlight, ErrBusy)
	}
	s.inFlight[id]++
	return nil
}

// done frees a slot that admit took.
func (s *Service) done(id uuid.UUID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.inFlight[id]--; s.inFlight[id] <= 0 {
		delete(s.inFlight, id)
	}
}
