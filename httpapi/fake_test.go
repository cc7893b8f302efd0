package httpapi

import (
	"context"
	"crypto/rand"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"gatehouse/actors"
	"gatehouse/actors/clock"
	"gatehouse/actors/ratelimit"
)

// fakeSystem is an in-memory KeyService and UserService with the real
// rules: ownership data, plans, licenses, rotation with a grace period,
// revocation, expiry, a sliding-window limit and daily usage. It is safe
// for concurrent use.
type fakeSystem struct {
	mu    sync.Mutex
	clk   *clock.Fake
	grace time.Duration

	users    map[uuid.UUID]actors.User
	password map[uuid.UUID]string
	sessions map[string]actors.Session

	keys    map[uuid.UUID]*fakeKey
	secrets map[string]fakeSecret

	unavailable bool // every call fails with ErrUnavailable
}

type fakeKey struct {
	info   actors.KeyInfo
	window ratelimit.Window
	daily  map[int64]int64 // Unix day → count
}

type fakeSecret struct {
	key      uuid.UUID
	validTil time.Time // zero: current secret; else the end of its grace period
}

var (
	_ KeyService  = (*fakeSystem)(nil)
	_ UserService = (*fakeSystem)(nil)
)

var fakeEpoch = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)

func newFakeSystem() *fakeSystem {
	return &fakeSystem{
		clk:      clock.NewFake(fakeEpoch),
		grace:    24 * time.Hour,
		users:    map[uuid.UUID]actors.User{},
		password: map[uuid.UUID]string{},
		sessions: map[string]actors.Session{},
		keys:     map[uuid.UUID]*fakeKey{},
		secrets:  map[string]fakeSecret{},
	}
}

func (f *fakeSystem) setUnavailable(v bool) {
	f.mu.Lock()
	f.unavailable = v
	f.mu.Unlock()
}

func (f *fakeSystem) lock() error {
	f.mu.Lock()
	if f.unavailable {
		f.mu.Unlock()
		return actors.ErrUnavailable
	}
	return nil
}

func invalid(field, msg string) error {
	return fmt.Errorf("%s %s: %w", field, msg, actors.ErrInvalidArgument)
}

func randomAlnum(n int) string {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	b := make([]byte, n)
	_, _ = rand.Read(b)
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return string(b)
}

// Users.

func (f *fakeSystem) CreateUser(_ context.Context, nu actors.NewUser) (actors.User, error) {
	if err := f.lock(); err != nil {
		return actors.User{}, err
	}
	defer f.mu.Unlock()
	if !strings.Contains(nu.Email, "@") {
		return actors.User{}, invalid("email", "must be an email address")
	}
	if len(nu.Password) < 8 {
		return actors.User{}, invalid("password", "must be at least 8 characters")
	}
	for _, u := range f.users {
		if strings.EqualFold(u.Email, nu.Email) {
			return actors.User{}, actors.ErrEmailTaken
		}
	}
	if nu.Role == "" {
		nu.Role = actors.RoleUser
	}
	if nu.Plan == "" {
		nu.Plan = actors.PlanStandard
	}
	u := actors.User{
		ID: uuid.New(), Email: nu.Email, Role: nu.Role, Plan: nu.Plan,
		LicenseActive: nu.LicenseActive, CreatedAt: f.clk.Now(), PasswordHash: "hash",
	}
	f.users[u.ID] = u
	f.password[u.ID] = nu.Password
	return u, nil
}

func (f *fakeSystem) UpdateUser(_ context.Context, id uuid.UUID, p actors.UserPatch) (actors.User, error) {
	if err := f.lock(); err != nil {
		return actors.User{}, err
	}
	defer f.mu.Unlock()
	u, ok := f.users[id]
	if !ok {
		return actors.User{}, actors.ErrUserNotFound
	}
	if p.Password != nil && len(*p.Password) < 8 {
		return actors.User{}, invalid("password", "must be at least 8 characters")
	}
	if p.Plan != nil {
		u.Plan = *p.Plan
	}
	if p.Role != nil {
		u.Role = *p.Role
	}
	if p.LicenseActive != nil {
		u.LicenseActive = *p.LicenseActive
	}
	if p.Password != nil {
		f.password[id] = *p.Password
	}
	f.users[id] = u
	return u, nil
}

func (f *fakeSystem) GetUser(_ context.Context, id uuid.UUID) (actors.User, error) {
	if err := f.lock(); err != nil {
		return actors.User{}, err
	}
	defer f.mu.Unlock()
	u, ok := f.users[id]
	if !ok {
		return actors.User{}, actors.ErrUserNotFound
	}
	return u, nil
}

func (f *fakeSystem) ListUsers(context.Context) ([]actors.User, error) {
	if err := f.lock(); err != nil {
		return nil, err
	}
	defer f.mu.Unlock()
	var out []actors.User
	for _, u := range f.users {
		out = append(out, u)
	}
	slices.SortFunc(out, func(a, b actors.User) int { return strings.Compare(a.Email, b.Email) })
	return out, nil
}

func (f *fakeSystem) Login(_ context.Context, email, password string) (actors.User, actors.Session, error) {
	if err := f.lock(); err != nil {
		return actors.User{}, actors.Session{}, err
	}
	defer f.mu.Unlock()
	for id, u := range f.users {
		if strings.EqualFold(u.Email, email) && f.password[id] == password {
			s := actors.Session{Token: randomAlnum(43), UserID: id, ExpiresAt: f.clk.Now().Add(7 * 24 * time.Hour)}
			f.sessions[s.Token] = s
			return u, s, nil
		}
	}
	return actors.User{}, actors.Session{}, actors.ErrBadCredentials
}

func (f *fakeSystem) Authenticate(_ context.Context, token string) (actors.User, error) {
	if err := f.lock(); err != nil {
		return actors.User{}, err
	}
	defer f.mu.Unlock()
	s, ok := f.sessions[token]
	if !ok || !f.clk.Now().Before(s.ExpiresAt) {
		return actors.User{}, actors.ErrSessionInvalid
	}
	u, ok := f.users[s.UserID]
	if !ok {
		return actors.User{}, actors.ErrSessionInvalid
	}
	return u, nil
}

func (f *fakeSystem) Logout(_ context.Context, token string) error {
	if err := f.lock(); err != nil {
		return err
	}
	defer f.mu.Unlock()
	delete(f.sessions, token)
	return nil
}
