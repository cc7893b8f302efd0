package accounts

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/google/uuid"

	"gatehouse/actors"
	"gatehouse/actors/clock"
	"gatehouse/actors/keys"
	"gatehouse/wal"
)

// Config tunes the accounts. Every field has a default in DefaultConfig.
type Config struct {
	// SessionTTL is the lifetime of a login session.
	SessionTTL time.Duration
	// Plans maps a plan to the default requests per hour of its users' keys.
	Plans map[Plan]int64
	// MaxKeys maps a plan to how many keys a user on it may hold.
	MaxKeys map[Plan]int
}

// DefaultConfig returns the defaults documented in the README.
func DefaultConfig() Config {
	return Config{
		SessionTTL: 7 * 24 * time.Hour,
		Plans:      map[Plan]int64{PlanStandard: 1000, PlanPremium: 10000},
		MaxKeys:    map[Plan]int{PlanStandard: 100, PlanPremium: 1000},
	}
}

// maxRateLimit is the largest requests-per-hour figure a key accepts
// (the keys' own bound, keys.MaxRateLimit).
const maxRateLimit = keys.MaxRateLimit

// Validate reports the first invalid field.
func (c Config) Validate() error {
	if c.SessionTTL <= 0 {
		return errors.New("accounts: session_ttl must be > 0")
	}
	for _, p := range []Plan{PlanStandard, PlanPremium} {
		if n, ok := c.MaxKeys[p]; !ok || n < 1 || n > 1_000_000 {
			return fmt.Errorf("accounts: keys.max_per_user.%s must be in 1..1000000", p)
		}
		if n, ok := c.Plans[p]; !ok || n < 1 || n > maxRateLimit {
			return fmt.Errorf("accounts: plans.%s must be in 1..%d", p, maxRateLimit)
		}
	}
	return nil
}

// CredentialRevoker is an optional capability of the system's other
// extensions, for credentials kept outside the accounts (actors/control's
// access tokens). The accounts call RevokeUserCredentials for a change
// that ends every session of a user (a new password, role or licence;
// LogoutAll), under the user's lock in a cluster: before the change is
// written, so that a failure or a crash in between leaves the credentials
// revoked and the change not made (the caller got an error and repeats
// it), and again after it, for any credential made meanwhile. Its error
// fails the call. It must be idempotent.
type CredentialRevoker interface {
	RevokeUserCredentials(ctx context.Context, user uuid.UUID) error
}

// Service is the accounts domain, an actors.Extension: users, sessions,
// logins and passwords, owned by one actor (management traffic is light
// next to the proxy path). Password hashing happens in the caller's
// goroutine, never in the actor. Its methods are safe for concurrent use
// once the System that runs it has started.
type Service struct {
	cfg     Config
	st      *accountsState // restored state, the actor's from Start on
	lg      *slog.Logger
	clock   clock.Clock
	sealer  *actors.Sealer
	root    *actor.RootContext
	pid     *actor.PID
	lock    func(ctx context.Context, name string) (func(), error)
	exts    []actors.Extension // the system's, for CredentialRevoker
	hashing chan struct{}      // password-hashing slots (login.go)
}

var (
	_ actors.Extension     = (*Service)(nil)
	_ actors.Ticker        = (*Service)(nil)
	_ actors.LiveApplier   = (*Service)(nil)
	_ actors.OfflineImager = (*Service)(nil)
)

// New returns the accounts with an empty state; the System restores and
// starts them.
func New(cfg Config) (*Service, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Service{cfg: cfg, st: newAccountsState(), hashing: make(chan struct{}, hashSlots())}, nil
}

// Name is the accounts' snapshot section.
func (s *Service) Name() string { return "accounts" }

// Owns reports whether t is one of the accounts' record types (2..4).
func (s *Service) Owns(t wal.Type) bool { return t >= recUserPut && t <= recSessionDel }

// Restore replaces the state with a snapshot section (nil: empty).
func (s *Service) Restore(section []byte) error {
	st, err := decodeSection(section)
	if err != nil {
		return err
	}
	s.st = st
	return nil
}

// Apply replays one record after the snapshot.
func (s *Service) Apply(seq uint64, rec wal.Record) error {
	return s.st.applyRecord(seq, rec)
}

// Start spawns the accounts actor on the restored state.
func (s *Service) Start(env actors.ExtensionEnv) error {
	s.lg, s.clock, s.sealer, s.root = env.Logger, env.Clock, env.Sealer, env.Root
	s.lock, s.exts = env.Lock, env.Extensions
	if s.lock == nil {
		s.lock = func(context.Context, string) (func(), error) { return func() {}, nil }
	}
	a := &accountsActor{log: env.Log, clock: env.Clock, accountsState: s.st, failures: map[string]*failState{}}
	s.st = nil
	s.pid = s.root.Spawn(env.Props(func() actor.Actor { return a }))
	return nil
}

// Capture returns the accounts' snapshot section.
func (s *Service) Capture(ctx context.Context) ([]byte, error) {
	reply := make(chan []byte, 1)
	b, _, err := actors.Ask(ctx, s.root, s.pid, captureAccounts{reply: reply}, reply, nil)
	return b, err
}

// Stop does nothing: the actor stops with the actor system.
func (s *Service) Stop() {}

// Tick expires sessions and forgets idle login-failure counters.
func (s *Service) Tick(now time.Time) { s.root.Send(s.pid, tick{now: now.Unix()}) }

// ApplyLive applies a record another node of a cluster wrote.
func (s *Service) ApplyLive(ctx context.Context, seq uint64, rec wal.Record) error {
	ev, err := decodeAccountEvent(rec)
	if err != nil {
		s.lg.Error("cluster: skipped an undecodable record", "seq", seq, "type", rec.Type, "err", err)
		return nil
	}
	done := make(chan struct{})
	if _, _, err := actors.Ask(ctx, s.root, s.pid, foreignAccount{seq: seq, ev: ev, done: done}, done, nil); err != nil {
		return fmt.Errorf("apply seq %d: %w", seq, err)
	}
	return nil
}

// OfflineImage returns an empty image of the accounts, off the actor
// (cluster mode's snapshots).
func (s *Service) OfflineImage() actors.OfflineImage {
	return &offlineImage{st: newAccountsState(), clock: s.clock}
}

type offlineImage struct {
	st    *accountsState
	clock clock.Clock // nil before Start
}

func (o *offlineImage) Restore(section []byte) error {
	st, err := decodeSection(section)
	if err == nil {
		o.st = st
	}
	return err
}

func (o *offlineImage) Apply(seq uint64, rec wal.Record) error { return o.st.applyRecord(seq, rec) }

// Section leaves out the sessions ended by now, as Capture does.
func (o *offlineImage) Section() ([]byte, error) {
	var now int64
	if o.clock != nil {
		now = o.clock.Now().Unix()
	}
	return o.st.section(now), nil
}

// applyRecord decodes and applies one record.
func (a *accountsState) applyRecord(seq uint64, rec wal.Record) error {
	ev, err := decodeAccountEvent(rec)
	if err != nil {
		return fmt.Errorf("seq %d: %w", seq, err)
	}
	a.apply(seq, ev)
	return nil
}

// section is the snapshot section of the state at now (sessions ended
// by then are left out):
//
//	uvarint len | users JSON ([]userRecord, by id)
//	uvarint len | sessions JSON ([]sessionRecord, by hash)
//
// the layout the accounts had inside the snapshot payload before it had
// named sections, so that payload's bytes decode as this section.
func (a *accountsState) section(now int64) []byte {
	users, sessions := a.encode(now)
	b := make([]byte, 0, len(users)+len(sessions)+2*binary.MaxVarintLen64)
	b = binary.AppendUvarint(b, uint64(len(users)))
	b = append(b, users...)
	b = binary.AppendUvarint(b, uint64(len(sessions)))
	return append(b, sessions...)
}

// decodeSection restores a state from a section (nil: empty).
func decodeSection(b []byte) (*accountsState, error) {
	st := newAccountsState()
	if b == nil {
		return st, nil
	}
	var parts [2][]byte
	for i := range parts {
		n, k := binary.Uvarint(b)
		if k <= 0 || n > uint64(len(b)-k) {
			return nil, fmt.Errorf("accounts section: %w", actors.ErrCorrupt)
		}
		parts[i], b = b[k:k+int(n)], b[k+int(n):]
	}
	if len(b) != 0 {
		return nil, fmt.Errorf("accounts section: trailing bytes: %w", actors.ErrCorrupt)
	}
	var us []userRecord
	var ss []sessionRecord
	if err := errors.Join(jsonUnmarshal(parts[0], &us), jsonUnmarshal(parts[1], &ss)); err != nil {
		return nil, fmt.Errorf("accounts section: %w: %w", actors.ErrCorrupt, err)
	}
	for _, u := range us {
		st.apply(0, userSaved{u: u})
	}
	for _, x := range ss {
		st.apply(0, sessionOpened{s: x})
	}
	return st, nil
}

// KeyOwner is what creating a key needs to know of u: their licence, and
// from their plan (or an admin's limit on them) how many keys they may
// hold and the per-hour limit of a new one.
func (s *Service) KeyOwner(u User) keys.KeyOwner {
	maxKeys, ok := s.cfg.MaxKeys[u.Plan]
	if !ok {
		maxKeys = s.cfg.MaxKeys[PlanStandard]
	}
	return keys.KeyOwner{
		ID: u.ID, Licensed: u.LicenseActive, MaxKeys: maxKeys,
		RateLimit: newKeyLimit(s.cfg.Plans, u.Plan, u.KeyRateLimit), Plan: string(u.Plan),
	}
}

// newKeyLimit is the per-hour limit of a new key of a user on plan with
// key limit userLimit: an admin's limit for this user's keys, else the
// plan's.
func newKeyLimit(plans map[Plan]int64, plan Plan, userLimit int64) int64 {
	if userLimit > 0 {
		return userLimit
	}
	if l, ok := plans[plan]; ok {
		return l
	}
	return plans[PlanStandard]
}

// revokeBefore revokes user's other credentials if p, applied to the user
// as they are, ends their sessions (as patchUser decides: a new password,
// role or licence). An unknown user revokes nothing (the patch itself
// reports it).
func (s *Service) revokeBefore(ctx context.Context, user uuid.UUID, p UserPatch) error {
	if p.Password == nil && p.Role == nil && p.LicenseActive == nil {
		return nil
	}
	cur, err := s.GetUser(ctx, user)
	switch {
	case err != nil:
		return nil // the patch reports it
	case p.Password == nil && (p.Role == nil || *p.Role == cur.Role) && (p.LicenseActive == nil || *p.LicenseActive == cur.LicenseActive):
		return nil
	}
	return s.revokeCredentials(ctx, user)
}

// revokeCredentials runs every CredentialRevoker extension for user.
func (s *Service) revokeCredentials(ctx context.Context, user uuid.UUID) error {
	for _, x := range s.exts {
		if r, ok := x.(CredentialRevoker); ok {
			if err := r.RevokeUserCredentials(ctx, user); err != nil {
				return fmt.Errorf("%s: %w", x.Name(), err)
			}
		}
	}
	return nil
}

// await waits for a reply or the caller's deadline.
func await[T any](ctx context.Context, ch <-chan T) (T, error) {
	v, _, err := actors.Await(ctx, ch, nil)
	return v, err
}
