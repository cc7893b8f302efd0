package actorstest_test

import (
	"testing"

	"gatehouse/actors/accounts"
	"gatehouse/actors/actorstest"
	"gatehouse/actors/keys"
)

func TestMain(m *testing.M) { actorstest.VerifyTestMain(m) }

// TestRestartKeepsAcknowledgedState: what the node acknowledged survives a
// crash, and what a clean stop flushed survives it too.
func TestRestartKeepsAcknowledgedState(t *testing.T) {
	n := actorstest.New(t)
	sys := n.Start()
	u, err := sys.CreateUser(actorstest.Ctx(t), accounts.NewUser{Email: "a@example.com", Password: "correct horse", LicenseActive: true})
	if err != nil {
		t.Fatal(err)
	}
	k, secret, err := sys.CreateKey(actorstest.Ctx(t), keys.NewKey{Owner: sys.KeyOwner(u), Name: "ci"})
	if err != nil {
		t.Fatal(err)
	}
	sys = n.Restart()
	if got := sys.Validate(actorstest.Ctx(t), []byte(secret)); got.Err != nil || got.KeyID != k.ID {
		t.Fatalf("Validate after crash = %+v, want key %s", got, k.ID)
	}
	if r := sys.Authorize(actorstest.Ctx(t), []byte(secret)); r.Err != nil {
		t.Fatalf("Authorize = %v", r.Err)
	}
	n.Stop()
	sys = n.Start()
	got, err := sys.GetKey(actorstest.Ctx(t), k.ID)
	if err != nil || got.UsageCount != 1 {
		t.Fatalf("GetKey after stop = %+v, %v; want usage 1", got, err)
	}
}
