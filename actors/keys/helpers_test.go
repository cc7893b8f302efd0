package keys_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"gatehouse/actors/accounts"
	"gatehouse/actors/actorstest"
	"gatehouse/actors/keys"
)

// t0 is the start of every node's fake clock.
var t0 = actorstest.T0

func ctx(tb testing.TB) context.Context {
	tb.Helper()
	return actorstest.Ctx(tb)
}

func mustUser(tb testing.TB, s actorstest.System, email string, plan accounts.Plan, licensed bool) accounts.User {
	tb.Helper()
	u, err := s.CreateUser(ctx(tb), accounts.NewUser{Email: email, Password: "correct horse", Plan: plan, LicenseActive: licensed})
	if err != nil {
		tb.Fatalf("CreateUser(%s): %v", email, err)
	}
	return u
}

func mustKey(tb testing.TB, s actorstest.System, owner accounts.User, name string) (keys.KeyInfo, string) {
	tb.Helper()
	k, secret, err := s.CreateKey(ctx(tb), keys.NewKey{Owner: s.KeyOwner(owner), Name: name})
	if err != nil {
		tb.Fatalf("CreateKey: %v", err)
	}
	return k, secret
}

func setLimit(tb testing.TB, s actorstest.System, k keys.KeyInfo, n int64) {
	tb.Helper()
	if _, err := s.UpdateKey(ctx(tb), k.ID, keys.KeyPatch{RateLimit: &n}); err != nil {
		tb.Fatalf("UpdateKey: %v", err)
	}
}

// authN authorizes secret n times and returns how many were admitted.
func authN(tb testing.TB, s actorstest.System, secret string, n int) (ok int) {
	tb.Helper()
	for range n {
		r := s.Authorize(ctx(tb), []byte(secret))
		switch {
		case r.Err == nil:
			ok++
		case errors.Is(r.Err, keys.ErrRateLimited):
		default:
			tb.Fatalf("Authorize: %v", r.Err)
		}
	}
	return ok
}

func usageOf(tb testing.TB, s actorstest.System, k keys.KeyInfo) keys.Usage {
	tb.Helper()
	u, err := s.KeyUsage(ctx(tb), k.ID, 7)
	if err != nil {
		tb.Fatalf("KeyUsage: %v", err)
	}
	return u
}

// waitFor polls cond for up to a second.
func waitFor(tb testing.TB, cond func() bool) {
	tb.Helper()
	for range 200 {
		if cond() {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	tb.Fatal("condition not reached in 1s")
}
