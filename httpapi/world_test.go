package httpapi

import (
	"context"
	"os"
	"sync"
	"testing"

	"gatehouse/actors/accounts"
	"gatehouse/actors/actorstest"
)

// worldSeed is the data dir withWorld starts from: the env's four users
// and a session for each, written once per test binary by a real system
// (stopped cleanly, so the dir holds a snapshot) into a dir TestMain
// removes. Creating them costs eight argon2id runs, half a second under
// -race; restoring a copy costs a few milliseconds.
type worldSeed struct {
	dir                                  string
	admin, alice, bob, carol             accounts.User
	adminCk, aliceCk, bobCk, carolCookie string
}

var (
	worldOnce sync.Once
	world0    *worldSeed
)

// seedWorld returns the seed, building it on first use with tb.
func seedWorld(tb testing.TB) *worldSeed {
	tb.Helper()
	worldOnce.Do(func() { world0 = buildWorldSeed(tb) })
	if world0 == nil {
		tb.Fatal("the world seed could not be built: see the first test that needed it")
	}
	return world0
}

func buildWorldSeed(tb testing.TB) *worldSeed {
	tb.Helper()
	n := actorstest.New(tb)
	sys := n.Start()
	ctx := context.Background()
	user := func(email string, role accounts.Role, plan accounts.Plan, license bool) (accounts.User, string) {
		tb.Helper()
		u, err := sys.CreateUser(ctx, accounts.NewUser{Email: email, Password: "password123", Role: role, Plan: plan, LicenseActive: license})
		if err != nil {
			tb.Fatalf("CreateUser(%s) = %v", email, err)
		}
		_, s, err := sys.Login(ctx, email, "password123")
		if err != nil {
			tb.Fatalf("Login(%s) = %v", email, err)
		}
		return u, s.Token
	}
	s := &worldSeed{}
	s.admin, s.adminCk = user("admin@example.com", accounts.RoleAdmin, accounts.PlanPremium, true)
	s.alice, s.aliceCk = user("alice@example.com", accounts.RoleUser, accounts.PlanStandard, true)
	s.bob, s.bobCk = user("bob@example.com", accounts.RoleUser, accounts.PlanPremium, true)
	s.carol, s.carolCookie = user("carol@example.com", accounts.RoleUser, accounts.PlanStandard, false)
	n.Stop()
	dir, err := os.MkdirTemp("", "httpapi-world-")
	if err != nil {
		tb.Fatal(err)
	}
	s.dir = dir
	actorstest.CopyDir(tb, n.Dir, dir)
	return s
}

// removeWorldSeed deletes the seed's dir once the tests are over.
func removeWorldSeed() {
	if world0 != nil {
		_ = os.RemoveAll(world0.dir)
	}
}
