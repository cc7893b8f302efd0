package accounts_test

import (
	"context"
	"testing"

	"gatehouse/actors/accounts"
	"gatehouse/actors/actorstest"
)

func TestMain(m *testing.M) { actorstest.VerifyTestMain(m) }

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
