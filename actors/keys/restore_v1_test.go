package keys_test

import (
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/uuid"

	"gatehouse/actors/accounts"
	"gatehouse/actors/actorstest"
	"gatehouse/actors/keys"
)

// testdata/datadir_v1 was written by the build before versioned account
// records (users and sessions without "v", snapshot payload "GHIMG\x01" with
// unsorted entries), with actorstest's defaults (8 shards, zero master key,
// 24 h grace) and its clock from T0:
//
//	T0       users admin, alice, bob (premium); sessions for alice and bob, a
//	         second bob session logged out
//	T0+1m    keys k1..k5; 3 requests on k1
//	T0+2m    k2 rotated, k3 revoked, k4 deleted, k5 patched (name
//	         "patched", limit 7, expiry T0+2m+48h), 2 requests on k5;
//	         snapshot at 19
//	T0+3m    2 requests on k1, 1 on k2's first secret; k2 rotated again (its
//	         first secret leaves the directory); k6 created, 1 request; bob's
//	         license revoked, his first session logged out; then killed
var (
	v1Admin = uuid.MustParse("54f93be7-09a3-4a4e-aa56-a9f831eda579")
	v1Alice = uuid.MustParse("aecb13b7-25e8-4af1-9983-654b24f5d289")
	v1Bob   = uuid.MustParse("fd77a198-4930-4eeb-9856-1b1d51e928e1")
)

// v1Secrets: every secret issued, what Validate must answer, and the key
// it must name (uuid.Nil: the directory knows no such secret).
var v1Secrets = []struct {
	name, secret string
	key          uuid.UUID
	err          error
}{
	{"k1", "svc_live_lBWpCiyMiZ5T4KxPeaXzKkOCDjgv8Lql", uuid.MustParse("b507a462-bfb3-46c6-8f4c-526f0ba40d24"), nil},
	{"k2 first", "svc_live_qdDCPUFRNceQtzNMZB98COvp9pFXbsSU", uuid.Nil, keys.ErrKeyInvalid},
	{"k2 second (grace)", "svc_live_OZWrvzdWoJUgCAocxvJWV38DxO93paez", uuid.MustParse("d4432335-04e6-401a-97d6-9e436e0cb9d9"), nil},
	{"k2 third", "svc_live_PabBAUKv3sLv8OGny7DUPVI2d9dnp9XS", uuid.MustParse("d4432335-04e6-401a-97d6-9e436e0cb9d9"), nil},
	{"k3 revoked", "svc_live_TmU6OW8wlybPTdP0h5MKfKlj6xe6OqYU", uuid.MustParse("cdce3e6a-4434-4616-aca0-1a125190ead5"), keys.ErrKeyRevoked},
	{"k4 deleted", "svc_live_s9y3kruXrlRuHhvgdrXxmJvwXxGWRdgi", uuid.Nil, keys.ErrKeyInvalid},
	{"k5", "svc_live_xQ9n2RpvJmk0nADs9a6wUVaK2Hod9zKZ", uuid.MustParse("46752343-72e8-4fde-a8cb-85f14b3b388c"), nil},
	{"k6", "svc_live_wlpDxjqBp9IuVDnfiwCQNTYSmspOSVXj", uuid.MustParse("80439df1-9a20-4a58-a5f6-9b30540d477e"), nil},
}

// v1Usage: each live key's total usage.
var v1Usage = map[string]int64{"k1": 5, "k2 third": 1, "k3 revoked": 0, "k5": 2, "k6": 1}

// TestRestoreDataDirV1: a data dir of the previous build restores (its
// snapshot, then its WAL), survives a snapshot in this build's format and a
// crash, and keeps working.
func TestRestoreDataDirV1(t *testing.T) {
	dir := t.TempDir()
	actorstest.CopyDir(t, filepath.Join("testdata", "datadir_v1"), dir)
	clk := actorstest.New(t).Clock
	clk.Set(actorstest.T0.Add(3 * time.Minute))
	n := actorstest.New(t, actorstest.WithDir(dir), actorstest.WithClock(clk))
	checkV1(t, "restored", n.Start())
	if _, err := n.Sys.Snapshot(); err != nil { // this build's snapshot of it
		t.Fatal(err)
	}
	checkV1(t, "after a snapshot and a crash", n.Restart())

	// And it keeps working: the second secret's grace ends, k2 rotates.
	sys := n.Sys
	k2 := v1Secrets[3].key
	clk.Advance(24 * time.Hour)
	if r := sys.Validate(actorstest.Ctx(t), []byte(v1Secrets[2].secret)); !errors.Is(r.Err, keys.ErrKeyExpired) {
		t.Errorf("k2's second secret after its grace: %v, want ErrKeyExpired", r.Err)
	}
	if _, _, err := sys.RotateKey(actorstest.Ctx(t), k2); err != nil {
		t.Fatalf("RotateKey(k2) = %v", err)
	}
	sys = n.Restart()
	if r := sys.Validate(actorstest.Ctx(t), []byte(v1Secrets[2].secret)); !errors.Is(r.Err, keys.ErrKeyInvalid) || r.KeyID != uuid.Nil {
		t.Errorf("k2's second secret after another rotation: %v (key %s), want ErrKeyInvalid and no directory entry", r.Err, r.KeyID)
	}
}

func checkV1(t *testing.T, stage string, sys actorstest.System) {
	t.Helper()
	ctx := actorstest.Ctx(t)
	for _, s := range v1Secrets {
		r := sys.Validate(ctx, []byte(s.secret))
		if !errors.Is(r.Err, s.err) || r.KeyID != s.key {
			t.Errorf("%s: Validate(%s) = %v, key %s; want %v, key %s", stage, s.name, r.Err, r.KeyID, s.err, s.key)
		}
		want, counted := v1Usage[s.name]
		if !counted {
			continue
		}
		u, err := sys.KeyUsage(ctx, s.key, 1)
		if err != nil || u.Total != want {
			t.Errorf("%s: KeyUsage(%s) = %d, %v; want %d", stage, s.name, u.Total, err, want)
		}
	}
	k5, err := sys.GetKey(ctx, v1Secrets[6].key)
	if exp := actorstest.T0.Add(2*time.Minute + 48*time.Hour); err != nil || k5.Name != "patched" || k5.RateLimit != 7 || !k5.ExpiresAt.Equal(exp) {
		t.Errorf("%s: k5 = %+v, %v; want patched, limit 7, expiring %v", stage, k5, err, exp)
	}
	if u, _ := sys.KeyUsage(ctx, v1Secrets[6].key, 1); u.Used != 2 || u.Remaining != 5 {
		t.Errorf("%s: k5 window = %d used, %d remaining; want 2, 5", stage, u.Used, u.Remaining)
	}
	if _, err := sys.GetKey(ctx, uuid.MustParse("790b1de1-865b-4683-97b0-a12f66e55752")); !errors.Is(err, keys.ErrKeyNotFound) {
		t.Errorf("%s: deleted k4: %v, want ErrKeyNotFound", stage, err)
	}
	for owner, want := range map[uuid.UUID]int{v1Alice: 3, v1Bob: 2, v1Admin: 0} {
		if ks, err := sys.ListKeys(ctx, owner); err != nil || len(ks) != want {
			t.Errorf("%s: ListKeys(%s) = %d keys, %v; want %d", stage, owner, len(ks), err, want)
		}
	}
	users, err := sys.ListUsers(ctx)
	if err != nil || len(users) != 3 {
		t.Fatalf("%s: ListUsers = %d, %v; want 3", stage, len(users), err)
	}
	bob, err := sys.GetUser(ctx, v1Bob)
	if err != nil || bob.LicenseActive || bob.Plan != accounts.PlanPremium || bob.Email != "bob@example.com" {
		t.Errorf("%s: bob = %+v, %v; want premium, license revoked", stage, bob, err)
	}
	if admin, err := sys.GetUser(ctx, v1Admin); err != nil || admin.Role != accounts.RoleAdmin {
		t.Errorf("%s: admin = %+v, %v", stage, admin, err)
	}
	sessions := []struct {
		token string
		user  uuid.UUID // uuid.Nil: logged out
	}{
		{"zAieSv0C4Al0wWGmQguWK3KVnIlB6ERvF0GasDG5A78", v1Alice},
		{"RFfI_qZOIvfDcZCs5sglRUO01m83uSmm9XqLa4_4VSc", uuid.Nil},
		{"2G6k-sLw_RZLC_JjKsMU1H54wd-BN02nIlG7wt1f3g0", uuid.Nil},
	}
	for i, s := range sessions {
		u, err := sys.Authenticate(ctx, s.token)
		if s.user == uuid.Nil && !errors.Is(err, accounts.ErrSessionInvalid) || s.user != uuid.Nil && (err != nil || u.ID != s.user) {
			t.Errorf("%s: Authenticate(session %d) = %s, %v; want user %s", stage, i, u.ID, err, s.user)
		}
	}
}
