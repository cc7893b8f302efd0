package keys_test

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"gatehouse/actors/accounts"
	"gatehouse/actors/actorstest"
	"gatehouse/actors/keys"
)

// TestRestartKeepsEverything: users, sessions, keys, rotation, revocation,
// usage and the limiter window survive a clean restart and a crash.
func TestRestartKeepsEverything(t *testing.T) {
	for _, clean := range []bool{true, false} {
		name := map[bool]string{true: "clean", false: "crash"}[clean]
		t.Run(name, func(t *testing.T) {
			n := actorstest.New(t)
			s := n.Start()
			u := mustUser(t, s, "a@example.com", accounts.PlanStandard, true)
			_, sess, err := s.Login(ctx(t), "a@example.com", "correct horse")
			if err != nil {
				t.Fatal(err)
			}
			k, old := mustKey(t, s, u, "rotated")
			setLimit(t, s, k, 10)
			_, fresh, _ := s.RotateKey(ctx(t), k.ID)
			r, revSecret := mustKey(t, s, u, "revoked")
			_ = s.RevokeKey(ctx(t), r.ID)
			authN(t, s, fresh, 4)
			if !clean {
				// A crash loses at most the unflushed interval: flush first.
				if err := s.FlushUsage(ctx(t)); err != nil {
					t.Fatal(err)
				}
			}
			if clean {
				n.Stop()
			} else {
				n.Crash()
			}
			s = n.Start()
			if got, err := s.Authenticate(ctx(t), sess.Token); err != nil || got.ID != u.ID {
				t.Errorf("session after restart: %v %v", got, err)
			}
			if err := s.Authorize(ctx(t), []byte(old)).Err; err != nil {
				t.Errorf("old secret in grace after restart: %v", err)
			}
			if err := s.Authorize(ctx(t), []byte(revSecret)).Err; !errors.Is(err, keys.ErrKeyRevoked) {
				t.Errorf("revoked after restart: %v", err)
			}
			// 4 + 1 used of 10: 5 more admitted, then limited.
			if got := authN(t, s, fresh, 7); got != 5 {
				t.Errorf("after restart admitted %d, want 5 (window restored)", got)
			}
			if us := usageOf(t, s, k); us.Total != 10 || us.Daily[6].Count != 10 {
				t.Errorf("usage after restart = %+v, want 10 today", us)
			}
		})
	}
}

// TestSnapshotThenReplayCountsOnce: usage flushed before a snapshot, after
// it, and captured while in flight is counted exactly once after a crash.
func TestSnapshotThenReplayCountsOnce(t *testing.T) {
	n := actorstest.New(t)
	s := n.Start()
	u := mustUser(t, s, "a@example.com", accounts.PlanStandard, true)
	k, secret := mustKey(t, s, u, "k")
	authN(t, s, secret, 3)
	s.Tick()               // async flush, may or may not commit before the snapshot
	authN(t, s, secret, 2) // pending at snapshot time
	if _, err := s.Snapshot(); err != nil {
		t.Fatal(err)
	}
	authN(t, s, secret, 4)
	if err := s.FlushUsage(ctx(t)); err != nil {
		t.Fatal(err)
	}
	n.Clock.Advance(2 * time.Second)
	authN(t, s, secret, 1) // never flushed: lost in the crash, as documented
	n.Crash()

	s = n.Start()
	if us := usageOf(t, s, k); us.Total != 9 || us.Used != 9 {
		t.Errorf("after crash usage = %+v, want total 9 and window 9", us)
	}
	// And once more, through a snapshot taken after the replay.
	if _, err := s.Snapshot(); err != nil {
		t.Fatal(err)
	}
	n.Crash()
	s = n.Start()
	if us := usageOf(t, s, k); us.Total != 9 {
		t.Errorf("after second restart usage = %d, want 9", us.Total)
	}
}

// TestPassivation: idle key actors hand their state back and come back
// with it intact.
func TestPassivation(t *testing.T) {
	n := actorstest.New(t)
	n.KeysConfig.IdleAfter, n.KeysConfig.SweepInterval = time.Minute, time.Second
	s := n.Start()
	u := mustUser(t, s, "a@example.com", accounts.PlanStandard, true)
	k, secret := mustKey(t, s, u, "k")
	authN(t, s, secret, 3)
	if got := keys.LiveKeys(s.Keys); got != 1 {
		t.Fatalf("live key actors = %d, want 1", got)
	}
	n.Clock.Advance(2 * time.Minute)
	s.Tick() // flushes (dirty), so not passivated yet
	waitFor(t, func() bool { return s.FlushUsage(ctx(t)) == nil })
	n.Clock.Advance(2 * time.Minute)
	s.Tick()
	waitFor(t, func() bool { return keys.LiveKeys(s.Keys) == 0 })
	if us := usageOf(t, s, k); us.Total != 3 {
		t.Errorf("usage after passivation = %d, want 3", us.Total)
	}
	if got := keys.LiveKeys(s.Keys); got != 1 {
		t.Errorf("live after reactivation = %d, want 1", got)
	}
}

func TestSessions(t *testing.T) {
	n := actorstest.New(t)
	s := n.Start()
	u := mustUser(t, s, "A@Example.com ", accounts.PlanStandard, true)
	if u.Email != "a@example.com" {
		t.Errorf("email not normalized: %q", u.Email)
	}
	if _, _, err := s.Login(ctx(t), "a@example.com", "wrong password"); !errors.Is(err, accounts.ErrBadCredentials) {
		t.Errorf("wrong password: %v", err)
	}
	if _, _, err := s.Login(ctx(t), "nobody@example.com", "correct horse"); !errors.Is(err, accounts.ErrBadCredentials) {
		t.Errorf("unknown email: %v", err)
	}
	if _, err := s.CreateUser(ctx(t), accounts.NewUser{Email: "a@example.com", Password: "12345678"}); !errors.Is(err, accounts.ErrEmailTaken) {
		t.Errorf("duplicate email: %v", err)
	}
	_, sess, err := s.Login(ctx(t), "a@example.com", "correct horse")
	if err != nil {
		t.Fatal(err)
	}
	if !sess.ExpiresAt.Equal(t0.Add(n.AccountsConfig.SessionTTL)) {
		t.Errorf("session expiry = %v", sess.ExpiresAt)
	}
	if _, err := s.Authenticate(ctx(t), sess.Token); err != nil {
		t.Fatal(err)
	}
	if err := s.Logout(ctx(t), sess.Token); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Authenticate(ctx(t), sess.Token); !errors.Is(err, accounts.ErrSessionInvalid) {
		t.Errorf("after logout: %v", err)
	}
	_, sess, _ = s.Login(ctx(t), "a@example.com", "correct horse")
	n.Clock.Advance(n.AccountsConfig.SessionTTL)
	if _, err := s.Authenticate(ctx(t), sess.Token); !errors.Is(err, accounts.ErrSessionInvalid) {
		t.Errorf("expired session: %v", err)
	}
	created, pw, err := s.EnsureAdmin(ctx(t), "root@example.com", "")
	if err != nil || !created || len(pw) < 16 {
		t.Fatalf("EnsureAdmin = %v %q %v", created, pw, err)
	}
	if again, _, _ := s.EnsureAdmin(ctx(t), "root@example.com", ""); again {
		t.Error("EnsureAdmin created the admin twice")
	}
	admin, _, err := s.Login(ctx(t), "root@example.com", pw)
	if err != nil || admin.Role != accounts.RoleAdmin {
		t.Errorf("admin login: %+v %v", admin, err)
	}
}

// TestUsageDuringSlowFlushIsLogged: requests made while a usage batch is
// still being written are logged by a later tick even if no request
// follows them, so a crash loses at most the last interval.
func TestUsageDuringSlowFlushIsLogged(t *testing.T) {
	n := actorstest.New(t)
	s := n.Start()
	u := mustUser(t, s, "a@example.com", accounts.PlanStandard, true)
	k, secret := mustKey(t, s, u, "k")
	authN(t, s, secret, 3)
	before, _ := n.Log.LastIndex()
	commits := make(chan struct{})
	n.Log.SetFaultHook(func() error { <-commits; return nil }) // hold the next commits
	s.Tick()                                                   // the 3 go out and wait on the disk
	time.Sleep(50 * time.Millisecond)
	authN(t, s, secret, 2) // pending while the batch is in flight
	s.Tick()               // meets the batch in flight
	time.Sleep(50 * time.Millisecond)
	close(commits) // the disk catches up
	n.Log.SetFaultHook(nil)
	time.Sleep(50 * time.Millisecond) // the commit notice reaches the key
	n.Clock.Advance(time.Second)
	s.Tick()                           // no new request: only the busy answer kept the key dirty
	time.Sleep(200 * time.Millisecond) // a fixed key logs its 2 in this time
	n.Crash()
	s = n.Start()
	if us := usageOf(t, s, k); us.Total != 5 {
		t.Errorf("usage after a crash = %d, want 5 (the 2 made during the slow flush were never logged)", us.Total)
	}
	// One record per tick that found usage, not one per commit: a key does
	// not re-flush when its batch commits (a hot key did, about a hundred
	// times a second, each an fsync).
	if last, _ := n.Log.LastIndex(); last-before != 2 {
		t.Errorf("%d usage records for 2 ticks with usage, want 2", last-before)
	}
}

// TestHotKeyLogsOncePerTick: a key used all the time writes one usage
// record per flush tick, not one per WAL commit (it did: each commit of
// its batch started the next, an fsync each).
func TestHotKeyLogsOncePerTick(t *testing.T) {
	n := actorstest.New(t)
	s := n.Start()
	u := mustUser(t, s, "a@example.com", accounts.PlanStandard, true)
	k, secret := mustKey(t, s, u, "k")
	setLimit(t, s, k, 1_000_000)
	authN(t, s, secret, 1)
	before, _ := n.Log.LastIndex()
	s.Tick()
	used := 1 + authN(t, s, secret, 1) // as the tick's batch commits
	deadline := time.Now().Add(300 * time.Millisecond)
	for time.Now().Before(deadline) {
		used += authN(t, s, secret, 10)
	}
	if last, _ := n.Log.LastIndex(); last-before != 1 {
		t.Errorf("%d records written by one tick under constant traffic, want 1", last-before)
	}
	if err := s.FlushUsage(ctx(t)); err != nil {
		t.Fatal(err)
	}
	n.Crash()
	s = n.Start()
	if us := usageOf(t, s, k); us.Total != int64(used) {
		t.Errorf("usage after flush and crash = %d, want %d", us.Total, used)
	}
}

// TestUsageExactAcrossTicks: many keys, one of them hot, used from several
// goroutines while flush rounds run back to back. A round flushes an idle
// key actor directly and a busy one through its mailbox, and hands the
// commit notice over either way: here a quarter of the keys take both
// directly, a quarter neither, the rest one each, as if busy, and the
// answers of both kinds interleave with requests. After a flush and a
// crash, every key's usage is exactly what it admitted.
func TestUsageExactAcrossTicks(t *testing.T) {
	defer keys.SetDeclineDirect(func(id uuid.UUID, kind string) bool {
		return kind == "flush" && id[15]&1 == 1 || kind == "logged" && id[15]&2 == 2
	})()
	n := actorstest.New(t)
	s := n.Start()
	u := mustUser(t, s, "a@example.com", accounts.PlanPremium, true)
	const nkeys = 40
	infos := make([]keys.KeyInfo, nkeys)
	secrets := make([]string, nkeys)
	for i := range infos {
		infos[i], secrets[i] = mustKey(t, s, u, fmt.Sprintf("k%d", i))
		setLimit(t, s, infos[i], 1_000_000)
	}
	var admitted [nkeys]atomic.Int64
	end := time.Now().Add(400 * time.Millisecond)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := g; time.Now().Before(end); i += 7 {
				k := i % nkeys
				if i%2 == 1 {
					k = 0 // a hot key: its actor is often busy at a tick
				}
				admitted[k].Add(int64(authN(t, s, secrets[k], 1)))
			}
		})
	}
	wg.Go(func() {
		for time.Now().Before(end) {
			s.Tick()
			time.Sleep(time.Millisecond)
		}
	})
	wg.Wait()
	if err := s.FlushUsage(ctx(t)); err != nil {
		t.Fatal(err)
	}
	n.Crash()
	s = n.Start()
	var total int64
	for i, k := range infos {
		want := admitted[i].Load()
		total += want
		if got := usageOf(t, s, k).Total; got != want {
			t.Errorf("key %d: usage after flush and crash = %d, want %d", i, got, want)
		}
	}
	t.Logf("%d requests over %d keys", total, nkeys)
}
