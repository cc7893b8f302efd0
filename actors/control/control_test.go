package control

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"gatehouse/actors"
	"gatehouse/actors/accounts"
	"gatehouse/actors/actorstest"
)

func TestMain(m *testing.M) { actorstest.VerifyTestMain(m) }

// node starts a system with a Control on a fresh data dir; ctl returns
// the running system's Control (a new one after each restart).
func node(t *testing.T) (*actorstest.Node, func() *Control) {
	t.Helper()
	var cur *Control
	n := actorstest.New(t, actorstest.WithExtensions(func() []actors.Extension {
		cur = New()
		return []actors.Extension{cur}
	}))
	n.Start()
	return n, func() *Control { return cur }
}

func TestTokensDurableAndChecked(t *testing.T) {
	n, ctl := node(t)
	ctx := actorstest.Ctx(t)
	user := uuid.New()
	tok, secret, err := ctl().CreateToken(ctx, NewToken{UserID: user, Name: "ci", Scopes: []Scope{ScopeWrite, ScopeRead, ScopeWrite}})
	if err != nil {
		t.Fatal(err)
	}
	if !WellFormed(secret) || !strings.HasPrefix(secret, "svc_pat_") || len(secret) != 40 {
		t.Fatalf("secret %q", secret)
	}
	if len(tok.Scopes) != 2 {
		t.Errorf("scopes %v: want read, write once each", tok.Scopes)
	}
	short, shortSecret, err := ctl().CreateToken(ctx, NewToken{UserID: user, Name: "short", Scopes: []Scope{ScopeRead}, ExpiresAt: n.Clock.Now().Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	got, err := ctl().CheckToken(ctx, secret, "192.0.2.1")
	if err != nil || got.ID != tok.ID || got.UserID != user || got.LastUsedAt.IsZero() {
		t.Fatalf("CheckToken = %+v, %v", got, err)
	}
	// Durable through the WAL alone, then through a snapshot.
	for _, snap := range []bool{false, true} {
		if snap {
			if _, err := n.Sys.Snapshot(); err != nil {
				t.Fatal(err)
			}
		}
		n.Restart()
		if got, err := ctl().CheckToken(ctx, secret, "192.0.2.1"); err != nil || got.ID != tok.ID || got.LastUsedAt.IsZero() {
			t.Fatalf("after restart (snapshot %v): %+v, %v", snap, got, err)
		}
	}
	// Expired on the next request once its time has passed.
	n.Clock.Advance(2 * time.Hour)
	if _, err := ctl().CheckToken(ctx, shortSecret, "192.0.2.1"); !errors.Is(err, ErrTokenExpired) {
		t.Errorf("expired token: %v", err)
	}
	// Revoked: fails on the next request, and after a restart.
	if err := ctl().RevokeToken(ctx, short.ID, uuid.New()); !errors.Is(err, ErrTokenNotFound) {
		t.Errorf("revoke another user's token: %v", err)
	}
	if err := ctl().RevokeToken(ctx, tok.ID, user); err != nil {
		t.Fatal(err)
	}
	if _, err := ctl().CheckToken(ctx, secret, "192.0.2.2"); !errors.Is(err, ErrTokenInvalid) {
		t.Errorf("revoked token: %v", err)
	}
	n.Restart()
	if _, err := ctl().CheckToken(ctx, secret, "192.0.2.3"); !errors.Is(err, ErrTokenInvalid) {
		t.Errorf("revoked token after restart: %v", err)
	}
	// Only the token's hash is stored.
	filepath.WalkDir(n.Dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		if b, _ := os.ReadFile(p); bytes.Contains(b, []byte(secret[len(TokenPrefix):])) {
			t.Errorf("%s holds a token in the clear", p)
		}
		return nil
	})
	ts, err := ctl().ListTokens(ctx, user)
	if err != nil || len(ts) != 1 || ts[0].ID != short.ID {
		t.Errorf("ListTokens = %+v, %v", ts, err)
	}
}

func TestTokenValidation(t *testing.T) {
	n, ctl := node(t)
	ctx := actorstest.Ctx(t)
	for _, nt := range []NewToken{
		{Name: "", Scopes: []Scope{ScopeRead}},
		{Name: strings.Repeat("x", 101), Scopes: []Scope{ScopeRead}},
		{Name: "x"},
		{Name: "x", Scopes: []Scope{"root"}},
		{Name: "x", Scopes: []Scope{ScopeRead}, ExpiresAt: n.Clock.Now().Add(-time.Second)},
	} {
		if _, _, err := ctl().CreateToken(ctx, nt); !errors.Is(err, actors.ErrInvalidArgument) {
			t.Errorf("CreateToken(%+v) = %v, want ErrInvalidArgument", nt, err)
		}
	}
}

func TestBadTokensThrottled(t *testing.T) {
	n, ctl := node(t)
	ctx := actorstest.Ctx(t)
	_, good, err := ctl().CreateToken(ctx, NewToken{UserID: uuid.New(), Name: "x", Scopes: []Scope{ScopeRead}})
	if err != nil {
		t.Fatal(err)
	}
	bad := "svc_pat_" + strings.Repeat("A", 32)
	for i := range freeFailures {
		if _, err := ctl().CheckToken(ctx, bad, "198.51.100.9"); !errors.Is(err, ErrTokenInvalid) {
			t.Fatalf("attempt %d: %v", i, err)
		}
	}
	var te *ThrottledError
	if _, err := ctl().CheckToken(ctx, bad, "198.51.100.9"); !errors.As(err, &te) || te.RetryAfter <= 0 {
		t.Fatalf("after %d bad tokens: %v, want throttled", freeFailures, err)
	}
	// Only failures wait: a valid token from the same address (another
	// client behind the same NAT) passes, and does not end the wait.
	if _, err := ctl().CheckToken(ctx, good, "198.51.100.9"); err != nil {
		t.Errorf("a valid token from a throttled address: %v", err)
	}
	if _, err := ctl().CheckToken(ctx, bad, "198.51.100.9"); !errors.As(err, &te) {
		t.Errorf("a bad token after a good one: %v, want still throttled", err)
	}
	if _, err := ctl().CheckToken(ctx, bad, "198.51.100.10"); !errors.Is(err, ErrTokenInvalid) || errors.As(err, &te) {
		t.Errorf("another client: %v", err)
	}
	n.Clock.Advance(2 * time.Second)
	if _, err := ctl().CheckToken(ctx, bad, "198.51.100.9"); !errors.Is(err, ErrTokenInvalid) || errors.As(err, &te) {
		t.Errorf("after the wait: %v, want invalid, not throttled", err)
	}
}

// TestTokenLineage: a token minted by a token expires no later than it
// (its expiry when none is asked for), cannot ask for a later one, and
// dies with it, whoever holds it: revoked with it (durably, in one write)
// or, should a parent go without its children (a revocation on another
// node racing a mint), refused at use.
func TestTokenLineage(t *testing.T) {
	n, ctl := node(t)
	ctx := actorstest.Ctx(t)
	alice, bob := uuid.New(), uuid.New()
	exp := n.Clock.Now().Add(time.Hour).Truncate(time.Second).UTC()
	mint := func(user, parent uuid.UUID, expires time.Time) (Token, string) {
		t.Helper()
		tk, secret, err := ctl().CreateToken(ctx, NewToken{UserID: user, Name: "t", Scopes: []Scope{ScopeRead}, ExpiresAt: expires, Parent: parent})
		if err != nil {
			t.Fatalf("CreateToken(parent %s) = %v", parent, err)
		}
		return tk, secret
	}
	root, rootSecret := mint(alice, uuid.Nil, exp)
	child, childSecret := mint(alice, root.ID, time.Time{})
	if !child.ExpiresAt.Equal(exp) || child.Parent != root.ID {
		t.Errorf("child expires %v (parent %s), want the parent's %v", child.ExpiresAt, child.Parent, exp)
	}
	if _, _, err := ctl().CreateToken(ctx, NewToken{UserID: alice, Name: "t", Scopes: []Scope{ScopeRead}, ExpiresAt: exp.Add(time.Second), Parent: root.ID}); !errors.Is(err, actors.ErrInvalidArgument) {
		t.Errorf("a child outliving its parent: %v, want ErrInvalidArgument", err)
	}
	early := exp.Add(-time.Minute)
	if tk, _ := mint(alice, root.ID, early); !tk.ExpiresAt.Equal(early) {
		t.Errorf("an earlier expiry = %v, want %v", tk.ExpiresAt, early)
	}
	_, grandSecret := mint(bob, child.ID, time.Time{}) // another user's (an admin's token minting for bob)
	other, otherSecret := mint(alice, uuid.Nil, time.Time{})
	forever, _ := mint(alice, other.ID, time.Time{})
	if !forever.ExpiresAt.IsZero() {
		t.Errorf("child of a token that never expires expires %v", forever.ExpiresAt)
	}

	if err := ctl().RevokeToken(ctx, root.ID, alice); err != nil {
		t.Fatal(err)
	}
	n.Restart() // one durable write
	for _, s := range []string{rootSecret, childSecret, grandSecret} {
		if _, err := ctl().CheckToken(ctx, s, "192.0.2.1"); !errors.Is(err, ErrTokenInvalid) {
			t.Errorf("a token of the revoked lineage: %v, want ErrTokenInvalid", err)
		}
	}
	if _, err := ctl().CheckToken(ctx, otherSecret, "192.0.2.2"); err != nil {
		t.Errorf("an unrelated token: %v", err)
	}
	if _, _, err := ctl().CreateToken(ctx, NewToken{UserID: alice, Name: "t", Scopes: []Scope{ScopeRead}, Parent: root.ID}); !errors.Is(err, ErrTokenInvalid) {
		t.Errorf("minting from a revoked token: %v, want ErrTokenInvalid", err)
	}

	// A parent deleted alone (as a delete applied from another node that
	// did not see the child yet): the child is refused at use.
	lone, _ := mint(alice, other.ID, time.Time{})
	_, loneChildSecret := mint(alice, lone.ID, time.Time{})
	if _, err := call(ctx, ctl(), func(a *ctlActor) (struct{}, error) {
		return struct{}{}, a.commit(deleted(kindToken, lone.ID.String()))
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := ctl().CheckToken(ctx, loneChildSecret, "192.0.2.3"); !errors.Is(err, ErrTokenInvalid) {
		t.Errorf("a token whose parent is gone: %v, want ErrTokenInvalid", err)
	}

	// A user's tokens all go, with the ones they minted for others.
	_, bobsSecret := mint(bob, other.ID, time.Time{})
	_, bobsOwnSecret := mint(bob, uuid.Nil, time.Time{})
	if err := ctl().RevokeUserTokens(ctx, alice); err != nil {
		t.Fatal(err)
	}
	if ts, err := ctl().ListTokens(ctx, alice); err != nil || len(ts) != 0 {
		t.Errorf("alice's tokens after RevokeUserTokens: %+v, %v", ts, err)
	}
	if _, err := ctl().CheckToken(ctx, bobsSecret, "192.0.2.4"); !errors.Is(err, ErrTokenInvalid) {
		t.Errorf("bob's token minted by alice's: %v, want ErrTokenInvalid", err)
	}
	if _, err := ctl().CheckToken(ctx, bobsOwnSecret, "192.0.2.4"); err != nil {
		t.Errorf("bob's own token: %v", err)
	}
	if err := ctl().RevokeUserTokens(ctx, alice); err != nil {
		t.Errorf("RevokeUserTokens again (none left) = %v", err)
	}
}

func TestServicesSealedAndDurable(t *testing.T) {
	n, ctl := node(t)
	ctx := actorstest.Ctx(t)
	const secret = "Bearer upstream-credential-0123456789"
	in := ServiceInput{Upstream: "http://127.0.0.1:9/base", Headers: map[string]string{"Authorization": secret}, Timeout: 3 * time.Second, MaxConns: 7, Enabled: true, Description: "test"}
	if _, err := ctl().CreateService(ctx, "svc-a", in); err != nil {
		t.Fatal(err)
	}
	if _, err := ctl().CreateService(ctx, "svc-a", in); !errors.Is(err, ErrServiceExists) {
		t.Errorf("duplicate: %v", err)
	}
	if _, err := ctl().UpdateService(ctx, "nope", in); !errors.Is(err, ErrServiceNotFound) {
		t.Errorf("update absent: %v", err)
	}
	key := uuid.New()
	if err := ctl().SetKeyServices(ctx, key, []string{"svc-a", "b", "svc-a"}); err != nil {
		t.Fatal(err)
	}
	var seen []*View
	ctl().Subscribe(func(v *View) { seen = append(seen, v) })
	in.KeepHeaders, in.Headers, in.Enabled = true, nil, false
	if _, err := ctl().UpdateService(ctx, "svc-a", in); err != nil {
		t.Fatal(err)
	}
	if len(seen) != 2 || seen[1].Services["svc-a"].Enabled || seen[1].Services["svc-a"].Headers["Authorization"] != secret {
		t.Fatalf("subscriber saw %d views; last %+v", len(seen), seen[len(seen)-1].Services["svc-a"])
	}
	check := func(stage string) {
		t.Helper()
		s, err := ctl().GetService("svc-a")
		if err != nil || s.Headers["Authorization"] != secret || s.Timeout != 3*time.Second || s.MaxConns != 7 || s.Enabled || s.Description != "test" {
			t.Fatalf("%s: %+v, %v", stage, s, err)
		}
		l, ok := ctl().View().KeyServices(key)
		if !ok || strings.Join(l, ",") != "b,svc-a" {
			t.Fatalf("%s: key services %v %v", stage, l, ok)
		}
	}
	check("live")
	n.Restart()
	check("after WAL replay")
	if _, err := n.Sys.Snapshot(); err != nil {
		t.Fatal(err)
	}
	n.Restart()
	check("after snapshot")
	// The credential is sealed in the WAL and the snapshot.
	filepath.WalkDir(n.Dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, _ := os.ReadFile(p)
		if bytes.Contains(b, []byte("upstream-credential")) {
			t.Errorf("%s holds the header value in the clear", p)
		}
		return nil
	})
	if err := ctl().SetKeyServices(ctx, key, nil); err != nil {
		t.Fatal(err)
	}
	if err := ctl().DeleteService(ctx, "svc-a"); err != nil {
		t.Fatal(err)
	}
	n.Restart()
	if _, err := ctl().GetService("svc-a"); !errors.Is(err, ErrServiceNotFound) {
		t.Errorf("deleted service after restart: %v", err)
	}
	if _, ok := ctl().View().KeyServices(key); ok {
		t.Error("lifted key list came back after restart")
	}
}

func TestDecodeRejectsCorrupt(t *testing.T) {
	c := New()
	for _, data := range []string{`{`, `{"kind":"token","v":1,"id":"x","data":{}}`, `{"kind":"nope","v":1,"id":"x","data":{}}`, `{"kind":"service","v":9,"id":"a","data":{}}`} {
		if err := c.Apply(1, walRecord(recSaved, data)); !errors.Is(err, actors.ErrCorrupt) {
			t.Errorf("Apply(%s) = %v, want ErrCorrupt", data, err)
		}
	}
	if err := c.Restore([]byte(`{"v":2}`)); !errors.Is(err, actors.ErrCorrupt) {
		t.Errorf("Restore(newer) = %v", err)
	}
}

func TestMaskHeader(t *testing.T) {
	for in, want := range map[string]string{"short": "••••", "sk-0123456789abcdef": "••••cdef"} {
		if got := MaskHeader(in); got != want {
			t.Errorf("MaskHeader(%q) = %q, want %q", in, got, want)
		}
	}
}

// FuzzDecode: no record or snapshot section makes Apply or Restore panic;
// a section that restores encodes back to a section that restores alike.
func FuzzDecode(f *testing.F) {
	f.Add([]byte(`{"kind":"token","v":1,"id":"6f1c1d3e-0c55-4a0e-9d7f-0c2b6f0e9a11","data":{"id":"6f1c1d3e-0c55-4a0e-9d7f-0c2b6f0e9a11","scopes":["read"]}}`))
	f.Add([]byte(`{"kind":"service","v":1,"id":"a","data":{"name":"a","upstream":"http://x","headers":{"K":"AAAA"}}}`))
	f.Add([]byte(`{"kind":"key_services","id":"6f1c1d3e-0c55-4a0e-9d7f-0c2b6f0e9a11"}`))
	f.Add([]byte(`{"v":1,"tokens":[],"services":[{"name":"a"}],"key_services":[]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		c := New()
		_ = c.Apply(1, walRecord(recSaved, string(b)))
		_ = c.Apply(2, walRecord(recDeleted, string(b)))
		if err := c.Restore(b); err == nil {
			again := New()
			if err := again.Restore(c.st.encode()); err != nil {
				t.Fatalf("re-encoded section does not restore: %v", err)
			}
			if !bytes.Equal(again.st.encode(), c.st.encode()) {
				t.Fatal("section does not round-trip")
			}
		}
	})
}

// TestAccountRecoveryRevokesTokens: whatever ends a user's sessions (a new
// password, role or licence; logout-all) revokes their access tokens too,
// durably, through actors.System's CredentialRevoker hook; other changes
// and other users' tokens are left alone.
func TestAccountRecoveryRevokesTokens(t *testing.T) {
	n, ctl := node(t)
	ctx := actorstest.Ctx(t)
	u, err := n.Sys.CreateUser(ctx, accounts.NewUser{Email: "a@example.com", Password: "password123", LicenseActive: true})
	if err != nil {
		t.Fatal(err)
	}
	other, err := n.Sys.CreateUser(ctx, accounts.NewUser{Email: "b@example.com", Password: "password123"})
	if err != nil {
		t.Fatal(err)
	}
	_, otherSecret, err := ctl().CreateToken(ctx, NewToken{UserID: other.ID, Name: "b", Scopes: []Scope{ScopeRead}})
	if err != nil {
		t.Fatal(err)
	}
	pw, plan, role, off := "another-password", accounts.PlanPremium, accounts.RoleAdmin, false
	tests := []struct {
		name    string
		change  func() error
		revokes bool
	}{
		{"plan", func() error { _, err := n.Sys.UpdateUser(ctx, u.ID, accounts.UserPatch{Plan: &plan}); return err }, false},
		{"same licence", func() error {
			on := true
			_, err := n.Sys.UpdateUser(ctx, u.ID, accounts.UserPatch{LicenseActive: &on})
			return err
		}, false},
		{"password", func() error { _, err := n.Sys.UpdateUser(ctx, u.ID, accounts.UserPatch{Password: &pw}); return err }, true},
		{"role", func() error { _, err := n.Sys.UpdateUser(ctx, u.ID, accounts.UserPatch{Role: &role}); return err }, true},
		{"licence", func() error {
			_, err := n.Sys.UpdateUser(ctx, u.ID, accounts.UserPatch{LicenseActive: &off})
			return err
		}, true},
		{"logout-all", func() error { return n.Sys.LogoutAll(ctx, u.ID) }, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, secret, err := ctl().CreateToken(ctx, NewToken{UserID: u.ID, Name: tt.name, Scopes: []Scope{ScopeRead}})
			if err != nil {
				t.Fatal(err)
			}
			if err := tt.change(); err != nil {
				t.Fatal(err)
			}
			n.Restart() // revoked durably, before the change's call returned
			_, err = ctl().CheckToken(ctx, secret, "192.0.2.1")
			if tt.revokes != errors.Is(err, ErrTokenInvalid) || !tt.revokes && err != nil {
				t.Errorf("token after the %s change: %v, want revoked %v", tt.name, err, tt.revokes)
			}
			if _, err := ctl().CheckToken(ctx, otherSecret, "192.0.2.2"); err != nil {
				t.Errorf("another user's token: %v", err)
			}
		})
	}
}
