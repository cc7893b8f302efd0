package accounts_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/google/uuid"

	"gatehouse/actors"
	"gatehouse/actors/accounts"
	"gatehouse/actors/actorstest"
	"gatehouse/wal"
)

// stateless is an extension with no state and no records.
type stateless struct{}

func (stateless) Name() string                            { return "stateless" }
func (stateless) Owns(wal.Type) bool                      { return false }
func (stateless) Restore([]byte) error                    { return nil }
func (stateless) Apply(uint64, wal.Record) error          { return nil }
func (stateless) Start(actors.ExtensionEnv) error         { return nil }
func (stateless) Capture(context.Context) ([]byte, error) { return nil, nil }
func (stateless) Stop()                                   {}

// revokerExt is an extension with the CredentialRevoker capability: it
// records the users it was asked about, and fails the call numbered
// failAt (1-based; 0: none).
type revokerExt struct {
	stateless
	mu     sync.Mutex
	users  []uuid.UUID
	failAt int
}

func (r *revokerExt) RevokeUserCredentials(_ context.Context, user uuid.UUID) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.users = append(r.users, user)
	if len(r.users) == r.failAt {
		return errors.New("disk full")
	}
	return nil
}

func (r *revokerExt) failCall(n int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failAt = n
}

func (r *revokerExt) calls() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.users)
}

// TestCredentialRevoker: UpdateUser calls the extensions' revoker when
// the change ends the user's sessions (password, role, licence), before
// writing it and again after; LogoutAll likewise. A failure before leaves
// the change unmade (a repeat makes it); one after fails the call, the
// change made.
func TestCredentialRevoker(t *testing.T) {
	n := actorstest.New(t)
	ext := &revokerExt{}
	n.Extensions = func() []actors.Extension { return []actors.Extension{ext} }
	s := n.Start()
	u := mustUser(t, s, "a@example.com", accounts.PlanStandard, true)
	premium, on, off, admin, pw := accounts.PlanPremium, true, false, accounts.RoleAdmin, "a new password"
	limit := int64(5)
	tests := []struct {
		name  string
		patch accounts.UserPatch
		want  int
	}{
		{"plan", accounts.UserPatch{Plan: &premium}, 0},
		{"key limit", accounts.UserPatch{KeyRateLimit: &limit}, 0},
		{"licence unchanged", accounts.UserPatch{LicenseActive: &on}, 0},
		{"licence", accounts.UserPatch{LicenseActive: &off}, 2},
		{"role", accounts.UserPatch{Role: &admin}, 2},
		{"password", accounts.UserPatch{Password: &pw}, 2},
	}
	for _, tt := range tests {
		before := ext.calls()
		if _, err := s.UpdateUser(ctx(t), u.ID, tt.patch); err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if got := ext.calls() - before; got != tt.want {
			t.Errorf("%s: %d revocations, want %d", tt.name, got, tt.want)
		}
	}
	before := ext.calls()
	if err := s.LogoutAll(ctx(t), u.ID); err != nil || ext.calls() != before+2 || ext.users[len(ext.users)-1] != u.ID {
		t.Errorf("LogoutAll = %v, %d revocations (users %v)", err, ext.calls()-before, ext.users)
	}

	licensed := func() bool {
		t.Helper()
		got, err := s.GetUser(ctx(t), u.ID)
		if err != nil {
			t.Fatal(err)
		}
		return got.LicenseActive
	}
	ext.failCall(ext.calls() + 1) // the revocation before the change
	if _, err := s.UpdateUser(ctx(t), u.ID, accounts.UserPatch{LicenseActive: &on}); err == nil || licensed() {
		t.Errorf("a failed revocation before: UpdateUser = %v, licensed %v; want an error, the change unmade", err, licensed())
	}
	if _, err := s.UpdateUser(ctx(t), u.ID, accounts.UserPatch{LicenseActive: &on}); err != nil || !licensed() {
		t.Errorf("the repeat: UpdateUser = %v, licensed %v", err, licensed())
	}
	ext.failCall(ext.calls() + 2) // the revocation after the change
	if _, err := s.UpdateUser(ctx(t), u.ID, accounts.UserPatch{LicenseActive: &off}); err == nil || licensed() {
		t.Errorf("a failed revocation after: UpdateUser = %v, licensed %v; want an error, the change made", err, licensed())
	}
	ext.failCall(ext.calls() + 1)
	if err := s.LogoutAll(ctx(t), u.ID); err == nil {
		t.Error("LogoutAll with a failing revoker = nil error")
	}
}
