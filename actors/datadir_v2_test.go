package actors_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/uuid"

	"gatehouse/actors"
	"gatehouse/actors/accounts"
	"gatehouse/actors/actorstest"
	"gatehouse/actors/gateway"
	"gatehouse/actors/keys"
)

// testdata/datadir_v2 was written by the build before named snapshot
// sections (payload "GHIMG\x01": users and sessions JSON, key blocks, then
// the extension sections), by TestWriteDataDirV2 below with
// GATEHOUSE_WRITE_DATADIR_V2=1, and is kept as it came out: users, sessions
// and keys with usage both in the snapshot and in the WAL after it, and a
// gateway provider and agent. datadir_v2.json lists what it holds.
const dataDirV2 = "datadir_v2"

// v2Manifest is what the data dir must restore to.
type v2Manifest struct {
	Users []struct {
		ID    uuid.UUID     `json:"id"`
		Email string        `json:"email"`
		Plan  accounts.Plan `json:"plan"`
		Role  accounts.Role `json:"role"`
		Lic   bool          `json:"license"`
	} `json:"users"`
	Sessions []struct {
		Token string    `json:"token"`
		User  uuid.UUID `json:"user"` // uuid.Nil: logged out
	} `json:"sessions"`
	Keys []struct {
		Name   string    `json:"name"`
		ID     uuid.UUID `json:"id"`
		Owner  uuid.UUID `json:"owner"`
		Secret string    `json:"secret"`
		Total  int64     `json:"total"`
		Err    string    `json:"err"` // "", "revoked", "invalid"
	} `json:"keys"`
	AgentUser string `json:"agent_user"`
	AgentKey  string `json:"agent_key"`
	Now       int64  `json:"now"` // the clock to restore at (Unix seconds)
}

func v2Extensions(t *testing.T) func() []actors.Extension {
	return func() []actors.Extension {
		gw, err := gateway.New(gateway.DefaultConfig())
		if err != nil {
			t.Fatal(err)
		}
		return []actors.Extension{gw}
	}
}

// TestWriteDataDirV2 writes testdata/datadir_v2; it runs only when asked
// (the fixture is the old build's output and must not be rewritten by a
// newer one).
func TestWriteDataDirV2(t *testing.T) {
	if os.Getenv("GATEHOUSE_WRITE_DATADIR_V2") != "1" {
		t.Skip("set GATEHOUSE_WRITE_DATADIR_V2=1 to rewrite testdata/datadir_v2")
	}
	n := actorstest.New(t, actorstest.WithExtensions(v2Extensions(t)))
	sys := n.Start()
	c := actorstest.Ctx(t)
	var m v2Manifest
	addUser := func(email string, plan accounts.Plan, role accounts.Role, lic bool) accounts.User {
		u, err := sys.CreateUser(c, accounts.NewUser{Email: email, Password: "correct horse", Plan: plan, Role: role, LicenseActive: lic})
		if err != nil {
			t.Fatal(err)
		}
		return u
	}
	admin := addUser("admin@example.com", accounts.PlanStandard, accounts.RoleAdmin, true)
	alice := addUser("alice@example.com", accounts.PlanStandard, accounts.RoleUser, true)
	bob := addUser("bob@example.com", accounts.PlanPremium, accounts.RoleUser, true)
	login := func(email string) string {
		_, s, err := sys.Login(c, email, "correct horse")
		if err != nil {
			t.Fatal(err)
		}
		return s.Token
	}
	sAlice, sBob1, sBob2 := login("alice@example.com"), login("bob@example.com"), login("bob@example.com")
	if err := sys.Logout(c, sBob2); err != nil {
		t.Fatal(err)
	}
	type key struct {
		info   keys.KeyInfo
		secret string
		err    string
	}
	byName := map[string]*key{}
	var order []string
	mk := func(name string, owner accounts.User) *key {
		info, secret, err := sys.CreateKey(c, keys.NewKey{Owner: sys.KeyOwner(owner), Name: name})
		if err != nil {
			t.Fatal(err)
		}
		k := &key{info: info, secret: secret}
		byName[name] = k
		order = append(order, name)
		return k
	}
	auth := func(k *key, times int) {
		for range times {
			if r := sys.Authorize(c, []byte(k.secret)); r.Err != nil {
				t.Fatal(r.Err)
			}
		}
	}
	n.Clock.Advance(time.Minute)
	k1, k2, k3 := mk("k1", alice), mk("k2", alice), mk("k3", bob)
	auth(k1, 3)
	auth(k2, 1)
	if err := sys.RevokeKey(c, k3.info.ID); err != nil {
		t.Fatal(err)
	}
	k3.err = "revoked"
	gw := n.Exts[0].(*gateway.Gateway)
	if _, err := gw.CreateProvider(c, gateway.ProviderInput{Name: "echo", ProviderType: gateway.ProviderEcho, Enabled: true}); err != nil {
		t.Fatal(err)
	}
	agentKey, prov, model := "helper", "echo", "m"
	if _, err := gw.CreateAgent(c, alice.ID.String(), gateway.AgentInput{AgentKey: &agentKey, Provider: &prov, Model: &model}); err != nil {
		t.Fatal(err)
	}
	sys.Tick() // usage flushed
	if _, err := sys.Snapshot(); err != nil {
		t.Fatal(err)
	}
	// After the snapshot: more usage, a new key, a logout, a patch.
	n.Clock.Advance(time.Minute)
	auth(k1, 2)
	k4 := mk("k4", bob)
	auth(k4, 1)
	if err := sys.Logout(c, sBob1); err != nil {
		t.Fatal(err)
	}
	off := false
	if _, err := sys.UpdateUser(c, bob.ID, accounts.UserPatch{LicenseActive: &off}); err != nil {
		t.Fatal(err)
	}
	sys.Tick()
	n.Crash()

	for _, u := range []accounts.User{admin, alice, bob} {
		lic := u.LicenseActive && u.ID != bob.ID
		m.Users = append(m.Users, struct {
			ID    uuid.UUID     `json:"id"`
			Email string        `json:"email"`
			Plan  accounts.Plan `json:"plan"`
			Role  accounts.Role `json:"role"`
			Lic   bool          `json:"license"`
		}{u.ID, u.Email, u.Plan, u.Role, lic})
	}
	for _, s := range []struct {
		tok string
		u   uuid.UUID
	}{{sAlice, alice.ID}, {sBob1, uuid.Nil}, {sBob2, uuid.Nil}} {
		m.Sessions = append(m.Sessions, struct {
			Token string    `json:"token"`
			User  uuid.UUID `json:"user"`
		}{s.tok, s.u})
	}
	totals := map[string]int64{"k1": 5, "k2": 1, "k3": 0, "k4": 1}
	for _, name := range order {
		k := byName[name]
		m.Keys = append(m.Keys, struct {
			Name   string    `json:"name"`
			ID     uuid.UUID `json:"id"`
			Owner  uuid.UUID `json:"owner"`
			Secret string    `json:"secret"`
			Total  int64     `json:"total"`
			Err    string    `json:"err"`
		}{name, k.info.ID, k.info.Owner, k.secret, totals[name], k.err})
	}
	m.AgentUser, m.AgentKey = alice.ID.String(), agentKey
	m.Now = n.Clock.Now().Unix()
	out := filepath.Join("testdata", dataDirV2)
	if err := os.RemoveAll(out); err != nil {
		t.Fatal(err)
	}
	actorstest.CopyDir(t, n.Dir, out)
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join("testdata", dataDirV2+".json"), append(b, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestRestoreDataDirV2: the data dir of the build before named sections
// restores unchanged (snapshot, then WAL), and again after this build's
// snapshot of it.
func TestRestoreDataDirV2(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("testdata", dataDirV2+".json"))
	if err != nil {
		t.Fatal(err)
	}
	var m v2Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	actorstest.CopyDir(t, filepath.Join("testdata", dataDirV2), dir)
	clk := actorstest.New(t).Clock
	clk.Set(time.Unix(m.Now, 0))
	n := actorstest.New(t, actorstest.WithDir(dir), actorstest.WithClock(clk), actorstest.WithExtensions(v2Extensions(t)))
	n.Start()
	checkV2(t, "restored", n, m)
	if _, err := n.Sys.Snapshot(); err != nil {
		t.Fatal(err)
	}
	n.Restart()
	checkV2(t, "after this build's snapshot and a crash", n, m)
}

func checkV2(t *testing.T, stage string, n *actorstest.Node, m v2Manifest) {
	t.Helper()
	c := actorstest.Ctx(t)
	sys := n.Sys
	users, err := sys.ListUsers(c)
	if err != nil || len(users) != len(m.Users) {
		t.Fatalf("%s: ListUsers = %d, %v; want %d", stage, len(users), err, len(m.Users))
	}
	for _, w := range m.Users {
		u, err := sys.GetUser(c, w.ID)
		if err != nil || u.Email != w.Email || u.Plan != w.Plan || u.Role != w.Role || u.LicenseActive != w.Lic {
			t.Errorf("%s: user %s = %+v, %v; want %+v", stage, w.ID, u, err, w)
		}
	}
	if _, _, err := sys.Login(c, m.Users[1].Email, "correct horse"); err != nil {
		t.Errorf("%s: Login(%s) = %v", stage, m.Users[1].Email, err)
	}
	for i, s := range m.Sessions {
		u, err := sys.Authenticate(c, s.Token)
		if s.User == uuid.Nil && !errors.Is(err, accounts.ErrSessionInvalid) || s.User != uuid.Nil && (err != nil || u.ID != s.User) {
			t.Errorf("%s: Authenticate(session %d) = %s, %v; want user %s", stage, i, u.ID, err, s.User)
		}
	}
	for _, k := range m.Keys {
		r := sys.Validate(c, []byte(k.Secret))
		var want error
		if k.Err == "revoked" {
			want = keys.ErrKeyRevoked
		}
		if !errors.Is(r.Err, want) || r.KeyID != k.ID {
			t.Errorf("%s: Validate(%s) = %v, key %s; want %v, key %s", stage, k.Name, r.Err, r.KeyID, want, k.ID)
		}
		u, err := sys.KeyUsage(c, k.ID, 7)
		if err != nil || u.Total != k.Total {
			t.Errorf("%s: KeyUsage(%s) = %d, %v; want %d", stage, k.Name, u.Total, err, k.Total)
		}
		info, err := sys.GetKey(c, k.ID)
		if err != nil || info.Owner != k.Owner || info.Name != k.Name {
			t.Errorf("%s: GetKey(%s) = %+v, %v", stage, k.Name, info, err)
		}
	}
	gw := n.Exts[0].(*gateway.Gateway)
	a, err := gw.GetAgent(c, m.AgentUser, m.AgentKey)
	if err != nil || a.AgentKey != m.AgentKey || a.Model != "m" {
		t.Errorf("%s: agent %s = %+v, %v", stage, m.AgentKey, a, err)
	}
	if ps, err := gw.ListProviders(c); err != nil || len(ps) != 1 || ps[0].Name != "echo" {
		t.Errorf("%s: providers = %+v, %v; want echo", stage, ps, err)
	}
}
