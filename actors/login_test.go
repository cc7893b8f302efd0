package actors_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"gatehouse/actors"
	"gatehouse/actors/actorstest"
	"gatehouse/wal"
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
	u := mustUser(t, sys, "a@example.com", actors.PlanStandard, true)
	release := actors.FillHashSlots(sys)
	if _, _, err := sys.LoginFrom(ctx(), "a@example.com", "correct horse", "10.0.0.1"); !errors.Is(err, actors.ErrBusy) {
		t.Errorf("login with every hashing slot taken = %v, want ErrBusy", err)
	}
	release()

	for i := range 5 {
		if _, _, err := sys.LoginFrom(ctx(), "a@example.com", "wrong password", "10.0.0.1"); !errors.Is(err, actors.ErrBadCredentials) {
			t.Fatalf("failure %d = %v", i+1, err)
		}
	}
	var te *actors.ThrottledError
	if _, _, err := sys.LoginFrom(ctx(), "a@example.com", "correct horse", "10.0.0.2"); !errors.As(err, &te) || te.RetryAfter != time.Second {
		t.Fatalf("6th attempt = %v, want throttled 1s (the account)", err)
	}
	if _, _, err := sys.LoginFrom(ctx(), "b@example.com", "x", "10.0.0.1"); !errors.As(err, &te) {
		t.Errorf("another account from the same IP = %v, want throttled (the IP)", err)
	}
	for i := range 20 { // the account's wait doubles, capped at a minute
		n.Clock.Advance(2 * time.Minute)
		if _, _, err := sys.LoginFrom(ctx(), "a@example.com", "wrong password", fmt.Sprintf("10.1.0.%d", i)); !errors.Is(err, actors.ErrBadCredentials) {
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
	if _, _, err := sys.LoginFrom(ctx(), "a@example.com", "wrong password", "10.0.0.4"); !errors.Is(err, actors.ErrBadCredentials) {
		t.Errorf("a failure after a success = %v, want ErrBadCredentials (the counter was reset)", err)
	}

	pw := "another horse"
	if _, err := sys.UpdateUser(ctx(), u.ID, actors.UserPatch{Password: &pw}); err != nil {
		t.Fatal(err)
	}
	if _, err := sys.Authenticate(ctx(), sess.Token); !errors.Is(err, actors.ErrSessionInvalid) {
		t.Errorf("session after a password change = %v, want ErrSessionInvalid", err)
	}
	sys = n.Restart()
	if _, err := sys.Authenticate(ctx(), sess.Token); !errors.Is(err, actors.ErrSessionInvalid) {
		t.Errorf("session after a password change and a restart = %v", err)
	}
}

// TestRevokeDestroysCiphertext (issue 14): once a key is revoked and a
// snapshot taken, its AES-GCM ciphertext is in no WAL record and no
// snapshot file.
func TestRevokeDestroysCiphertext(t *testing.T) {
	n := actorstest.New(t)
	sys := n.Start()
	ctx := actorstest.Ctx(t)
	u := mustUser(t, sys, "a@example.com", actors.PlanStandard, true)
	k, _ := mustKey(t, sys, u, "k")
	var sealed []byte
	if err := n.Log.Replay(0, func(_ uint64, r wal.Record) error {
		if s, ok := actors.SealedOfCreated(r); ok {
			sealed = bytes.Clone(s)
		}
		return nil
	}); err != nil || len(sealed) == 0 {
		t.Fatalf("no key-created record: %v", err)
	}
	if err := sys.RevokeKey(ctx, k.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := sys.Snapshot(); err != nil {
		t.Fatal(err)
	}
	// The WAL's records (its file may keep freed pages until bbolt reuses
	// them: documented) and every snapshot file.
	first, err := n.Log.FirstIndex()
	if err != nil {
		t.Fatal(err)
	}
	if first > 0 { // 0: the snapshot left the WAL empty
		if err := n.Log.Replay(first-1, func(seq uint64, r wal.Record) error {
			if bytes.Contains(r.Data, sealed) {
				t.Errorf("WAL record %d still holds the revoked key's ciphertext", seq)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	n.Stop()
	err = filepath.WalkDir(filepath.Join(n.Dir, "snap"), func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err == nil && bytes.Contains(b, sealed) {
			t.Errorf("%s still holds the revoked key's ciphertext", p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestKeyLimit (issue 14): a user holds at most their plan's number of
// keys; deleting one frees a slot; the count is exact after a restart.
func TestKeyLimit(t *testing.T) {
	n := actorstest.New(t, actorstest.WithConfig(func(c *actors.Config) {
		c.MaxKeys = map[actors.Plan]int{actors.PlanStandard: 2, actors.PlanPremium: 3}
	}))
	sys := n.Start()
	ctx := actorstest.Ctx(t)
	u := mustUser(t, sys, "a@example.com", actors.PlanStandard, true)
	var ids []actors.KeyInfo
	for i := range 2 {
		k, _ := mustKey(t, sys, u, fmt.Sprint("k", i))
		ids = append(ids, k)
	}
	if _, _, err := sys.CreateKey(ctx, actors.NewKey{Owner: u, Name: "third"}); !errors.Is(err, actors.ErrKeyLimit) {
		t.Fatalf("third key = %v, want ErrKeyLimit", err)
	}
	if err := sys.DeleteKey(ctx, ids[0].ID); err != nil {
		t.Fatal(err)
	}
	if _, _, err := sys.CreateKey(ctx, actors.NewKey{Owner: u, Name: "again"}); err != nil {
		t.Fatalf("after a delete = %v", err)
	}
	sys = n.Restart()
	if _, _, err := sys.CreateKey(ctx, actors.NewKey{Owner: u, Name: "after restart"}); !errors.Is(err, actors.ErrKeyLimit) {
		t.Errorf("after restart = %v, want ErrKeyLimit (2 keys held)", err)
	}
}
