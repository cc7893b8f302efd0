package accounts_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"gatehouse/actors/accounts"
	"gatehouse/actors/actorstest"
)

// TestLoginHardening: hashing is bounded (ErrBusy when every slot is
// taken); failures are throttled per account and per IP with exponential
// backoff capped at a minute for an account; a success resets; a new
// password ends the user's sessions.
func TestLoginHardening(t *testing.T) {
	n := actorstest.New(t)
	sys := n.Start()
	// Each call gets its own deadline: some 30 argon2id hashes under -race
	// on a busy 2-core machine (make test) overrun one 10 s budget.
	ctx := func() context.Context { return actorstest.Ctx(t) }
	u := mustUser(t, sys, "a@example.com", accounts.PlanStandard, true)
	release := accounts.FillHashSlots(sys.Service)
	if _, _, err := sys.LoginFrom(ctx(), "a@example.com", "correct horse", "10.0.0.1"); !errors.Is(err, accounts.ErrBusy) {
		t.Errorf("login with every hashing slot taken = %v, want ErrBusy", err)
	}
	release()

	for i := range 5 {
		if _, _, err := sys.LoginFrom(ctx(), "a@example.com", "wrong password", "10.0.0.1"); !errors.Is(err, accounts.ErrBadCredentials) {
			t.Fatalf("failure %d = %v", i+1, err)
		}
	}
	var te *accounts.ThrottledError
	if _, _, err := sys.LoginFrom(ctx(), "a@example.com", "correct horse", "10.0.0.2"); !errors.As(err, &te) || te.RetryAfter != time.Second {
		t.Fatalf("6th attempt = %v, want throttled 1s (the account)", err)
	}
	if _, _, err := sys.LoginFrom(ctx(), "b@example.com", "x", "10.0.0.1"); !errors.As(err, &te) {
		t.Errorf("another account from the same IP = %v, want throttled (the IP)", err)
	}
	for i := range 20 { // the account's wait doubles, capped at a minute
		n.Clock.Advance(2 * time.Minute)
		if _, _, err := sys.LoginFrom(ctx(), "a@example.com", "wrong password", fmt.Sprintf("10.1.0.%d", i)); !errors.Is(err, accounts.ErrBadCredentials) {
			t.Fatalf("failure %d, 2 minutes after the previous = %v", i, err)
		}
	}
	if _, _, err := sys.LoginFrom(ctx(), "a@example.com", "correct horse", "10.0.0.4"); !errors.As(err, &te) || te.RetryAfter > time.Minute {
		t.Fatalf("after many failures = %v, want throttled at most a minute", err)
	}
	n.Clock.Advance(time.Minute)
	_, sess, err := sys.LoginFrom(ctx(), "a@example.com", "correct horse", "10.0.0.4")
	if err != nil {
		t.Fatalf("login after the wait = %v", err)
	}
	if _, _, err := sys.LoginFrom(ctx(), "a@example.com", "wrong password", "10.0.0.4"); !errors.Is(err, accounts.ErrBadCredentials) {
		t.Errorf("a failure after a success = %v, want ErrBadCredentials (the counter was reset)", err)
	}

	pw := "another horse"
	if _, err := sys.UpdateUser(ctx(), u.ID, accounts.UserPatch{Password: &pw}); err != nil {
		t.Fatal(err)
	}
	if _, err := sys.Authenticate(ctx(), sess.Token); !errors.Is(err, accounts.ErrSessionInvalid) {
		t.Errorf("session after a password change = %v, want ErrSessionInvalid", err)
	}
	sys = n.Restart()
	if _, err := sys.Authenticate(ctx(), sess.Token); !errors.Is(err, accounts.ErrSessionInvalid) {
		t.Errorf("session after a password change and a restart = %v", err)
	}
}
