package keys_test

import (
	"errors"
	"testing"

	"gatehouse/actors"
	"gatehouse/actors/accounts"
	"gatehouse/actors/actorstest"
)

// TestKeyRateLimitCap: an admin's limit on one key (UserPatch.
// KeyRateLimitCap) caps the user's later keys when it is lower than what
// they get now, and is that key's alone when it is higher; durable.
func TestKeyRateLimitCap(t *testing.T) {
	n := actorstest.New(t)
	s := n.Start()
	u := mustUser(t, s, "a@example.com", accounts.PlanStandard, true) // plan: 1000 an hour
	capTo := func(v int64) accounts.User {
		t.Helper()
		got, err := s.UpdateUser(ctx(t), u.ID, accounts.UserPatch{KeyRateLimitCap: &v})
		if err != nil {
			t.Fatalf("UpdateUser(cap %d) = %v", v, err)
		}
		return got
	}
	newKeyLimit := func() int64 {
		t.Helper()
		cur, err := s.GetUser(ctx(t), u.ID)
		if err != nil {
			t.Fatal(err)
		}
		k, _ := mustKey(t, s, cur, "k")
		return k.RateLimit
	}
	steps := []struct {
		name      string
		cap       int64
		wantUser  int64 // KeyRateLimit after
		wantNewKy int64 // a new key's limit after
	}{
		{"raised above the plan's", 1_000_000, 0, 1000},
		{"equal to the plan's", 1000, 0, 1000},
		{"lowered", 10, 10, 10},
		{"raised again", 500, 10, 10},
		{"lowered further", 5, 5, 5},
	}
	for _, st := range steps {
		if got := capTo(st.cap); got.KeyRateLimit != st.wantUser {
			t.Errorf("%s: KeyRateLimit = %d, want %d", st.name, got.KeyRateLimit, st.wantUser)
		}
		if got := newKeyLimit(); got != st.wantNewKy {
			t.Errorf("%s: a new key's limit = %d, want %d", st.name, got, st.wantNewKy)
		}
	}
	// An admin's own limit for the user, above the plan's, is lowered by
	// a lower one on a key, and kept by a higher one.
	high := int64(5000)
	if _, err := s.UpdateUser(ctx(t), u.ID, accounts.UserPatch{KeyRateLimit: &high}); err != nil {
		t.Fatal(err)
	}
	if got := capTo(8000); got.KeyRateLimit != 5000 {
		t.Errorf("cap 8000 over a user limit of 5000: KeyRateLimit = %d", got.KeyRateLimit)
	}
	if got := capTo(2000); got.KeyRateLimit != 2000 {
		t.Errorf("cap 2000 under a user limit of 5000: KeyRateLimit = %d", got.KeyRateLimit)
	}
	n.Restart()
	s = n.Sys
	if got := newKeyLimit(); got != 2000 {
		t.Errorf("after a restart, a new key's limit = %d, want 2000", got)
	}
	for _, bad := range []int64{0, -1, 1_000_000_001} {
		if _, err := s.UpdateUser(ctx(t), u.ID, accounts.UserPatch{KeyRateLimitCap: &bad}); !errors.Is(err, actors.ErrInvalidArgument) {
			t.Errorf("cap %d: %v, want actors.ErrInvalidArgument", bad, err)
		}
	}
}
