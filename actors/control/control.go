package control

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/google/uuid"

	"gatehouse/actors"
	"gatehouse/actors/clock"
	"gatehouse/wal"
)

// Errors of the domain; httpapi maps them to statuses and codes.
var (
	// ErrTokenInvalid: the token is malformed, unknown or revoked (401).
	ErrTokenInvalid = errors.New("control: invalid access token")
	// ErrTokenExpired: the token passed its expiresAt (401).
	ErrTokenExpired = errors.New("control: access token expired")
	// ErrTokenThrottled: too many bad tokens from this client; see
	// ThrottledError.
	ErrTokenThrottled = errors.New("control: too many invalid access tokens")
	// ErrTokenNotFound: no such token (of this user) to revoke (404).
	ErrTokenNotFound = errors.New("control: access token not found")
	// ErrServiceNotFound: no service of that name was created through the API.
	ErrServiceNotFound = errors.New("control: service not found")
	// ErrServiceExists: a service of that name exists.
	ErrServiceExists = errors.New("control: service already exists")
)

// ThrottledError says how long a client that sent too many bad tokens
// must wait.
type ThrottledError struct{ RetryAfter time.Duration }

func (e *ThrottledError) Error() string {
	return fmt.Sprintf("%v: retry in %s", ErrTokenThrottled, e.RetryAfter)
}

func (e *ThrottledError) Unwrap() error { return ErrTokenThrottled }

// Token format: TokenPrefix followed by tokenRandLen characters of
// [A-Za-z0-9], distinct from keys' svc_live_ so that secret scanners and
// the proxy tell them apart.
const (
	TokenPrefix    = "svc_pat_"
	tokenRandLen   = 32
	tokenAlphabet  = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	maxTokensUser  = 100
	maxNameLen     = 100
	lastUsedPeriod = 60 // seconds: lastUsedAt is made durable at most this often per token
)

// Bad-token throttling per client IP, in the spirit of the login's (see
// actors/login.go): freeFailures bad tokens pass, then each attempt waits
// 2^(n-free) seconds after the last failure, at most maxWait; counters are
// in memory only and forgotten after failureTTL without a failure.
const (
	freeFailures = 5
	maxWait      = 15 * time.Minute
	failureTTL   = time.Hour
)

// Scope is what a token may do: read (GET routes), write (read and the
// changes a user makes to their own keys and tokens), admin (everything,
// for an admin user only). Each scope grants the ones below it.
type Scope string

const (
	ScopeRead  Scope = "read"
	ScopeWrite Scope = "write"
	ScopeAdmin Scope = "admin"
)

func (s Scope) rank() int {
	switch s {
	case ScopeRead:
		return 1
	case ScopeWrite:
		return 2
	case ScopeAdmin:
		return 3
	}
	return 0
}

// Valid reports whether s is one of the three scopes.
func (s Scope) Valid() bool { return s.rank() > 0 }

// Grants reports whether a token holding s may use a route needing need.
func (s Scope) Grants(need Scope) bool { return s.Valid() && s.rank() >= need.rank() }

// Token is an access token as the API shows it (never its secret).
type Token struct {
	ID         uuid.UUID
	UserID     uuid.UUID
	Name       string
	Scopes     []Scope
	CreatedAt  time.Time
	ExpiresAt  time.Time // zero: never
	LastUsedAt time.Time // zero: never used
	// Parent is the token that minted this one (uuid.Nil: a session did).
	Parent uuid.UUID
}

// Grants reports whether one of t's scopes grants need.
func (t Token) Grants(need Scope) bool {
	for _, s := range t.Scopes {
		if s.Grants(need) {
			return true
		}
	}
	return false
}

// NewToken is the input of CreateToken; the caller has checked that the
// scopes do not exceed the user's role, nor Parent's scopes.
type NewToken struct {
	UserID    uuid.UUID
	Name      string
	Scopes    []Scope
	ExpiresAt time.Time // zero: never (or Parent's expiry)
	// Parent is the token the request that mints this one came with
	// (uuid.Nil: a session, or the operator). The new token expires no
	// later than Parent and dies with it (see RevokeToken).
	Parent uuid.UUID
}

// Service is a proxied service created through the API. In a View its
// header values are in the clear; the API shows them masked.
type Service struct {
	Name        string
	Upstream    string
	Headers     map[string]string
	Timeout     time.Duration // 0: the default
	MaxConns    int           // 0: the default
	Enabled     bool
	Description string
	CreatedAt   time.Time
	UpdatedAt   time.Time
}

// ServiceInput is the full new state of a service (create or replace);
// the caller validated it. KeepHeaders keeps the current headers on a
// replace (Headers is then ignored).
type ServiceInput struct {
	Upstream    string
	Headers     map[string]string
	KeepHeaders bool
	Timeout     time.Duration
	MaxConns    int
	Enabled     bool
	Description string
}

// View is the frozen state the hot path reads: never changed once
// published.
type View struct {
	// Services are the API's services by name.
	Services map[string]Service
	keySvcs  map[uuid.UUID][]string
}

// KeyServices returns the services key may reach; ok is false for a key
// that may reach every service. It does not allocate.
func (v *View) KeyServices(key uuid.UUID) (services []string, ok bool) {
	l, ok := v.keySvcs[key]
	return l, ok
}

// Control is the extension. Create it with New, give it to actors.New in
// Deps.Extensions, and use its methods once the System runs.
type Control struct {
	st    *state
	root  *actor.RootContext
	pid   *actor.PID
	log   actors.EventLog
	clock clock.Clock
	seal  *actors.Sealer
	lg    *slog.Logger

	view  atomic.Pointer[View]
	subMu sync.Mutex
	subs  []func(*View)

	// wrapLog, set by tests, wraps the log the actor appends to (cluster
	// tests share one log between nodes).
	wrapLog func(actors.EventLog) actors.EventLog
}

var (
	_ actors.Extension   = (*Control)(nil)
	_ actors.LiveApplier = (*Control)(nil)
)

// New returns an empty Control.
func New() *Control {
	c := &Control{st: newState()}
	c.view.Store(&View{Services: map[string]Service{}, keySvcs: map[uuid.UUID][]string{}})
	return c
}

// Name is the snapshot section's name.
func (c *Control) Name() string { return "control" }

// Owns claims record types 200 and 201.
func (c *Control) Owns(t wal.Type) bool { return owns(t) }

// Restore replaces the state with a snapshot section.
func (c *Control) Restore(section []byte) error {
	if section == nil {
		c.st = newState()
		return nil
	}
	st, err := decodeSection(section)
	if err != nil {
		return err
	}
	c.st = st
	return nil
}

// Apply replays one record after the snapshot.
func (c *Control) Apply(seq uint64, r wal.Record) error {
	e, err := decodeEvent(r)
	if err != nil {
		return fmt.Errorf("seq %d: %w", seq, err)
	}
	if err := c.st.apply(e); err != nil {
		return fmt.Errorf("seq %d: %w", seq, err)
	}
	return nil
}

// ApplyLive applies a record another node wrote (cluster mode; see
// actors.LiveApplier) on the actor, with the apply its own changes use,
// and returns once it has (the View republished when services or key
// lists changed), or with ctx's error. Every record is a full-state save
// or a delete, so one already reflected changes nothing; a delete of what
// is gone is a no-op; a record older than this node's own latest write of
// the same entity is skipped (liveMarks). Nothing is appended, nothing is
// called out.
func (c *Control) ApplyLive(ctx context.Context, seq uint64, r wal.Record) error {
	e, err := decodeEvent(r)
	if err != nil {
		return fmt.Errorf("seq %d: %w", seq, err)
	}
	_, err = call(ctx, c, func(a *ctlActor) (struct{}, error) {
		if a.marks.stale(seq, e) {
			return struct{}{}, nil
		}
		return struct{}{}, a.apply(e)
	})
	if err != nil {
		return fmt.Errorf("apply seq %d: %w", seq, err)
	}
	return nil
}

// Start spawns the actor and publishes the first View.
func (c *Control) Start(env actors.ExtensionEnv) error {
	c.root, c.log, c.clock, c.seal, c.lg = env.Root, env.Log, env.Clock, env.Sealer, env.Logger
	if c.wrapLog != nil {
		c.log = c.wrapLog(c.log)
	}
	if c.lg == nil {
		c.lg = slog.New(slog.DiscardHandler)
	}
	a := &ctlActor{c: c, st: c.st, failures: map[string]*failState{}, lastSeen: map[uuid.UUID]int64{}}
	c.st = nil // the actor's from now on
	v, err := a.buildView(nil)
	if err != nil {
		return err
	}
	a.publish(v)
	c.pid = c.root.Spawn(env.Props(func() actor.Actor { return a }))
	return nil
}

// Capture returns the snapshot section.
func (c *Control) Capture(ctx context.Context) ([]byte, error) {
	return call(ctx, c, func(a *ctlActor) ([]byte, error) { return a.st.encode(), nil })
}

// Stop has nothing to release.
func (c *Control) Stop() {}

// Tick sweeps idle bad-token counters.
func (c *Control) Tick(now time.Time) {
	if c.pid != nil {
		c.root.Send(c.pid, command{run: func(a *ctlActor) { a.sweep(now.Unix()) }})
	}
}

// View returns the current frozen view (never nil).
func (c *Control) View() *View { return c.view.Load() }

// Subscribe calls fn with the current view now and with every new one,
// on the actor's goroutine before the change that made it is answered:
// fn must be quick and must not call back into c.
func (c *Control) Subscribe(fn func(*View)) {
	c.subMu.Lock()
	defer c.subMu.Unlock()
	c.subs = append(c.subs, fn)
	fn(c.view.Load())
}

// command is the actor's one message: run a closure on the one writer.
type command struct{ run func(a *ctlActor) }

type ctlActor struct {
	c        *Control
	st       *state
	failures map[string]*failState
	lastSeen map[uuid.UUID]int64 // use not yet durable, Unix seconds
	marks    liveMarks           // cluster mode: this node's latest writes
}

func (a *ctlActor) Receive(ctx actor.Context) {
	if m, ok := ctx.Message().(command); ok {
		m.run(a)
	}
}

// call runs fn on the actor and waits for its answer or ctx.
func call[R any](ctx context.Context, c *Control, fn func(a *ctlActor) (R, error)) (R, error) {
	type result struct {
		v   R
		err error
	}
	var zero R
	if c.pid == nil {
		return zero, fmt.Errorf("control not started: %w", actors.ErrUnavailable)
	}
	reply := make(chan result, 1)
	c.root.Send(c.pid, command{run: func(a *ctlActor) {
		v, err := fn(a)
		reply <- result{v, err}
	}})
	r, _, err := actors.Await(ctx, reply, nil)
	if err != nil {
		return zero, fmt.Errorf("control: %w", actors.ErrUnavailable)
	}
	return r.v, r.err
}

// commit appends the events (durable on return) and applies them.
func (a *ctlActor) commit(evs ...event) error {
	recs := make([]wal.Record, len(evs))
	for i, e := range evs {
		recs[i] = e.record()
	}
	last, err := a.c.log.Append(recs...)
	if err != nil {
		return fmt.Errorf("log control event: %w", err)
	}
	if err := a.apply(evs...); err != nil {
		return err
	}
	for i, e := range evs {
		a.marks.own(last-uint64(len(evs)-1-i), e)
	}
	return nil
}

// apply applies events this actor logged, or another node did
// (ApplyLive), and, when services or key lists changed, publishes a new
// view. A token deleted forgets its use not yet durable.
func (a *ctlActor) apply(evs ...event) error {
	republish := false
	var keyCopy map[uuid.UUID][]string
	for _, e := range evs {
		if e.kind == kindKeyServices && keyCopy == nil {
			keyCopy = maps.Clone(a.st.keySvcs) // the published view keeps the old map
			a.st.keySvcs = keyCopy
		}
		if err := a.st.apply(e); err != nil {
			return err // corrupt: this actor's own records never are
		}
		if e.kind == kindToken && e.data == nil {
			if id, err := uuid.Parse(e.id); err == nil {
				delete(a.lastSeen, id)
			}
		}
		republish = republish || e.kind != kindToken
	}
	if republish {
		v, err := a.buildView(a.c.view.Load())
		if err != nil {
			return err
		}
		a.publish(v)
	}
	return nil
}

// buildView opens the services' headers into a new view.
func (a *ctlActor) buildView(prev *View) (*View, error) {
	v := &View{Services: make(map[string]Service, len(a.st.services)), keySvcs: a.st.keySvcs}
	for name, rec := range a.st.services {
		if prev != nil {
			if old, ok := prev.Services[name]; ok && old.UpdatedAt.Equal(time.Unix(0, rec.UpdatedAt).UTC()) && old.Upstream == rec.Upstream {
				v.Services[name] = old
				continue
			}
		}
		s, err := a.c.open(rec)
		if err != nil {
			return nil, err
		}
		v.Services[name] = s
	}
	return v, nil
}

func (a *ctlActor) publish(v *View) {
	a.c.view.Store(v)
	a.c.subMu.Lock()
	subs := slices.Clone(a.c.subs)
	a.c.subMu.Unlock()
	for _, fn := range subs {
		fn(v)
	}
}

// open is the view of rec, its header values unsealed.
func (c *Control) open(rec *serviceRec) (Service, error) {
	s := Service{
		Name: rec.Name, Upstream: rec.Upstream, Timeout: time.Duration(rec.TimeoutMs) * time.Millisecond,
		MaxConns: rec.MaxConns, Enabled: rec.Enabled, Description: rec.Description,
		CreatedAt: time.Unix(0, rec.CreatedAt).UTC(), UpdatedAt: time.Unix(0, rec.UpdatedAt).UTC(),
	}
	if len(rec.Headers) > 0 {
		s.Headers = make(map[string]string, len(rec.Headers))
		for k, sealed := range rec.Headers {
			b, err := c.seal.Open(sealed, headerAAD(rec.Name, k))
			if err != nil {
				return Service{}, fmt.Errorf("service %s header %s: %w", rec.Name, k, err)
			}
			s.Headers[k] = string(b)
		}
	}
	return s, nil
}

func headerAAD(service, header string) []byte {
	return []byte("service-header\x00" + service + "\x00" + strings.ToLower(header))
}

// newTokenSecret draws a token from crypto/rand without modulo bias.
func newTokenSecret() (string, error) {
	out := make([]byte, 0, len(TokenPrefix)+tokenRandLen)
	out = append(out, TokenPrefix...)
	var buf [64]byte
	for len(out) < cap(out) {
		if _, err := rand.Read(buf[:]); err != nil {
			return "", fmt.Errorf("draw token: %w", err)
		}
		for _, b := range buf {
			if b < 248 && len(out) < cap(out) {
				out = append(out, tokenAlphabet[b%62])
			}
		}
	}
	return string(out), nil
}

// WellFormed reports whether s has the shape of an access token.
func WellFormed(s string) bool {
	if len(s) != len(TokenPrefix)+tokenRandLen || !strings.HasPrefix(s, TokenPrefix) {
		return false
	}
	for _, c := range s[len(TokenPrefix):] {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

func invalid(format string, args ...any) error {
	return fmt.Errorf(format+": %w", append(args, actors.ErrInvalidArgument)...)
}

func unixOrZero(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.Unix()
}

func timeOrZero(sec int64) time.Time {
	if sec == 0 {
		return time.Time{}
	}
	return time.Unix(sec, 0).UTC()
}

func hashOf(secret string) tokenHash { return sha256.Sum256([]byte(secret)) }
