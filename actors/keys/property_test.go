package keys_test

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/uuid"

	"gatehouse/actors/accounts"
	"gatehouse/actors/actorstest"
	"gatehouse/actors/keys"
	"gatehouse/snapshot"
	"gatehouse/wal"
)

var propSeed = flag.Uint64("seed", 0, "run TestPropertyRestoreEqualsLive with this seed only")

// TestPropertyRestoreEqualsLive drives a real System with random command
// sequences over keys (create, rotate, revoke, delete, patch, traffic,
// usage flushes, time) and accounts (users, plans, licenses, roles,
// passwords, logins, logouts), taking a snapshot half-way. Then, compared
// through the snapshot encoding (CanonicalImage), the live state must equal
// a restore from the snapshot plus the WAL after it, and a restore from the
// whole WAL alone; and every secret and session ever issued must get the
// same answer from all three. Both restores run the code restore runs
// (image.apply), the live system the actors' code, so any drift between
// the two (say replay deleting what live code keeps) fails here.
func TestPropertyRestoreEqualsLive(t *testing.T) {
	seeds := []uint64{1, 2, 3}
	if *propSeed != 0 {
		seeds = []uint64{*propSeed}
	} else if !testing.Short() {
		seeds = append(seeds, uint64(time.Now().UnixNano()))
	}
	for _, seed := range seeds {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			t.Logf("rerun with: go test ./actors -run TestPropertyRestoreEqualsLive -seed %d", seed)
			runProperty(t, seed, 160)
		})
	}
}

// world is the model: what the test issued, to pick operands from.
type world struct {
	rng      *rand.Rand
	users    []accounts.User
	emails   map[uuid.UUID]string
	tokens   []string
	keys     []uuid.UUID
	secrets  []string
	hashings int // argon2id runs: slow under -race, so bounded
}

func runProperty(t *testing.T, seed uint64, steps int) {
	live := actorstest.New(t)
	sys := live.Start()
	w := &world{rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), emails: map[uuid.UUID]string{}}
	w.createUser(t, sys) // something to act on from the start
	for i := range steps {
		w.step(t, live, sys)
		if i == steps/2 {
			preDir := copyDataDir(t, live) // the whole WAL so far
			idx, err := sys.Snapshot()
			if err != nil {
				t.Fatalf("Snapshot: %v", err)
			}
			defer func(pre string, idx uint64) { checkRestores(t, live, w, pre, idx) }(preDir, idx)
		}
	}
	if err := sys.FlushUsage(actorstest.Ctx(t)); err != nil {
		t.Fatal(err)
	}
}

// step runs one random command. Refusals (a revoked key rotated, a
// license missing) are fine: the point is that live and restored agree.
func (w *world) step(t *testing.T, n *actorstest.Node, sys actorstest.System) {
	t.Helper()
	ctx := actorstest.Ctx(t)
	switch r := w.rng.IntN(100); {
	case r < 4 && w.hashings < 8:
		w.createUser(t, sys)
	case r < 10:
		u := w.users[w.rng.IntN(len(w.users))]
		p := accounts.UserPatch{}
		switch w.rng.IntN(4) {
		case 0:
			lic := w.rng.IntN(2) == 0
			p.LicenseActive = &lic
		case 1:
			pl := []accounts.Plan{accounts.PlanStandard, accounts.PlanPremium}[w.rng.IntN(2)]
			p.Plan = &pl
		case 2:
			ro := []accounts.Role{accounts.RoleUser, accounts.RoleAdmin}[w.rng.IntN(2)]
			p.Role = &ro
		default:
			if w.hashings < 8 {
				w.hashings++
				pw := "correct horse"
				p.Password = &pw
			}
		}
		if _, err := sys.UpdateUser(ctx, u.ID, p); err != nil {
			t.Fatalf("UpdateUser: %v", err)
		}
	case r < 14 && w.hashings < 10:
		w.hashings++
		u := w.users[w.rng.IntN(len(w.users))]
		if _, s, err := sys.Login(ctx, w.emails[u.ID], "correct horse"); err == nil {
			w.tokens = append(w.tokens, s.Token)
		} else {
			t.Fatalf("Login: %v", err)
		}
	case r < 17 && len(w.tokens) > 0:
		if err := sys.Logout(ctx, w.tokens[w.rng.IntN(len(w.tokens))]); err != nil {
			t.Fatalf("Logout: %v", err)
		}
	case r < 30:
		u, err := sys.GetUser(ctx, w.users[w.rng.IntN(len(w.users))].ID)
		if err != nil {
			t.Fatal(err)
		}
		nk := keys.NewKey{Owner: sys.KeyOwner(u), Name: fmt.Sprint("k", len(w.keys))}
		if w.rng.IntN(4) == 0 {
			nk.ExpiresAt = n.Clock.Now().Add(time.Duration(1+w.rng.IntN(48)) * time.Hour)
		}
		k, secret, err := sys.CreateKey(ctx, nk)
		switch {
		case err == nil:
			w.keys, w.secrets = append(w.keys, k.ID), append(w.secrets, secret)
		case !errors.Is(err, keys.ErrLicenseRequired):
			t.Fatalf("CreateKey: %v", err)
		}
	case len(w.keys) == 0:
	case r < 36:
		if _, secret, err := sys.RotateKey(ctx, w.key()); err == nil {
			w.secrets = append(w.secrets, secret)
		} else if !errors.Is(err, keys.ErrKeyInactive) && !errors.Is(err, keys.ErrKeyNotFound) {
			t.Fatalf("RotateKey: %v", err)
		}
	case r < 39:
		w.tolerate(t, "RevokeKey", sys.RevokeKey(ctx, w.key()))
	case r < 42:
		w.tolerate(t, "DeleteKey", sys.DeleteKey(ctx, w.key()))
	case r < 50:
		p := keys.KeyPatch{}
		switch w.rng.IntN(3) {
		case 0:
			lim := int64(1 + w.rng.IntN(20))
			p.RateLimit = &lim
		case 1:
			name := fmt.Sprint("renamed ", w.rng.IntN(1000))
			p.Name = &name
		default:
			exp := time.Time{}
			if w.rng.IntN(2) == 0 {
				exp = n.Clock.Now().Add(time.Duration(1+w.rng.IntN(72)) * time.Hour)
			}
			p.ExpiresAt = &exp
		}
		_, err := sys.UpdateKey(ctx, w.key(), p)
		w.tolerate(t, "UpdateKey", err)
	case r < 80:
		secret := w.secrets[w.rng.IntN(len(w.secrets))]
		for range 1 + w.rng.IntN(8) {
			sys.Authorize(ctx, []byte(secret))
		}
	case r < 88:
		sys.Tick() // usage flushes in flight while the next commands run
	default:
		n.Clock.Advance(time.Duration(w.rng.IntN(4*3600)) * time.Second)
	}
}

func (w *world) key() uuid.UUID { return w.keys[w.rng.IntN(len(w.keys))] }

func (w *world) tolerate(t *testing.T, op string, err error) {
	t.Helper()
	if err != nil && !errors.Is(err, keys.ErrKeyNotFound) {
		t.Fatalf("%s: %v", op, err)
	}
}

func (w *world) createUser(t *testing.T, sys actorstest.System) {
	t.Helper()
	w.hashings++
	email := fmt.Sprintf("u%d@example.com", len(w.users))
	u, err := sys.CreateUser(actorstest.Ctx(t), accounts.NewUser{
		Email: email, Password: "correct horse", LicenseActive: w.rng.IntN(4) != 0,
		Plan: []accounts.Plan{accounts.PlanStandard, accounts.PlanPremium}[w.rng.IntN(2)],
	})
	if err != nil {
		t.Fatalf("CreateUser: %v", err)
	}
	w.users = append(w.users, u)
	w.emails[u.ID] = email
}

// checkRestores compares the live node with a snapshot+WAL restore and a
// WAL-only restore (pre: a copy of the data dir just before the snapshot
// at idx, so its WAL is complete up to there).
func checkRestores(t *testing.T, live *actorstest.Node, w *world, pre string, idx uint64) {
	t.Helper()
	if t.Failed() {
		return
	}
	snapDir := copyDataDir(t, live)
	walOnly := joinWAL(t, pre, snapDir, idx)
	want := canonical(t, live)
	wantAnswers := answers(t, live.Sys, w)
	replayFromBeforeCut(t, snapDir, walOnly, idx, live.Clock.Now().Unix(), want)
	for _, tc := range []struct{ name, dir string }{{"snapshot+WAL", snapDir}, {"WAL only", walOnly}} {
		n := actorstest.New(t, actorstest.WithDir(tc.dir), actorstest.WithClock(live.Clock))
		n.Start()
		if got := canonical(t, n); !bytes.Equal(got, want) {
			t.Errorf("%s restore differs from the live state (%d vs %d canonical bytes)", tc.name, len(got), len(want))
		}
		got := answers(t, n.Sys, w)
		for k, v := range wantAnswers {
			if got[k] != v {
				t.Errorf("%s restore: %s = %s, live says %s", tc.name, k, got[k], v)
			}
		}
		n.Crash()
	}
}

// canonical snapshots the node's system and returns the canonical form of
// the payload.
func canonical(t *testing.T, n *actorstest.Node) []byte {
	t.Helper()
	if _, err := n.Sys.Snapshot(); err != nil {
		t.Fatalf("Snapshot: %v", err)
	}
	st, err := snapshot.New(snapshot.Config{Dir: filepath.Join(n.Dir, "snap"), Retain: 2}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	var out []byte
	if _, err := st.Load(func(_ uint64, payload []byte) error {
		out, err = keys.CanonicalImage(payload, n.Clock.Now().Unix())
		return err
	}); err != nil {
		t.Fatalf("load snapshot: %v", err)
	}
	return out
}

// answers is what the system says about every secret and session the
// test ever issued (Validate does not count; Authenticate changes nothing).
func answers(t *testing.T, sys actorstest.System, w *world) map[string]string {
	t.Helper()
	ctx := actorstest.Ctx(t)
	out := map[string]string{}
	for i, s := range w.secrets {
		r := sys.Validate(ctx, []byte(s))
		out[fmt.Sprint("secret ", i)] = fmt.Sprintf("%v key=%s active=%t used=%d", r.Err, r.KeyID, r.IsActive, r.Limit.Used)
	}
	for i, tok := range w.tokens {
		u, err := sys.Authenticate(ctx, tok)
		out[fmt.Sprint("session ", i)] = fmt.Sprintf("%v %s %s %s %t", err, u.ID, u.Plan, u.Role, u.LicenseActive)
	}
	for _, id := range w.keys {
		k, err := sys.KeyUsage(ctx, id, 30)
		out["usage "+id.String()] = fmt.Sprintf("%v %d %d %v", err, k.Total, k.Used, k.Daily)
	}
	return out
}

// copyDataDir copies the node's data dir (its WAL is quiet: the test
// issues nothing meanwhile) to a new temp dir.
func copyDataDir(t *testing.T, n *actorstest.Node) string {
	t.Helper()
	if err := n.Sys.FlushUsage(actorstest.Ctx(t)); err != nil {
		t.Fatal(err)
	}
	dst := t.TempDir()
	actorstest.CopyDir(t, n.Dir, dst)
	return dst
}

// joinWAL builds a data dir whose WAL is pre's (everything before the
// snapshot at idx), the barrier at idx, then post's records after idx:
// the whole history, with no snapshot, under the original sequences.
func joinWAL(t *testing.T, pre, post string, idx uint64) string {
	t.Helper()
	dir := t.TempDir()
	b, err := os.ReadFile(filepath.Join(pre, "wal.db"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "wal.db"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	open := func(path string) *wal.Log {
		cfg := wal.DefaultConfig()
		cfg.Path, cfg.NoSync = path, true
		l, err := wal.Open(cfg, nil, nil)
		if err != nil {
			t.Fatalf("wal.Open(%s): %v", path, err)
		}
		return l
	}
	dst, src := open(filepath.Join(dir, "wal.db")), open(filepath.Join(post, "wal.db"))
	defer dst.Close()
	defer src.Close()
	if last, err := dst.Append(wal.Record{Type: 1}); err != nil || last != idx {
		t.Fatalf("barrier appended at %d, %v; want %d", last, err, idx)
	}
	err = src.Replay(idx, func(seq uint64, r wal.Record) error {
		last, err := dst.Append(wal.Record{Type: r.Type, Data: bytes.Clone(r.Data)})
		if err == nil && last != seq {
			err = fmt.Errorf("record %d appended at %d", seq, last)
		}
		return err
	})
	if err != nil {
		t.Fatalf("join WAL: %v", err)
	}
	return dir
}

// replayFromBeforeCut restores, as restore does but without a System, from
// the snapshot at idx plus the whole WAL after some index at or below idx,
// and from the WAL alone. Records the snapshot already reflects must change
// nothing (the per-key watermarks skip them; the rest are idempotent), as a
// snapshot that captured records committed after its barrier relies on;
// and this compares the directory the replay built, not the one a snapshot
// implies.
func replayFromBeforeCut(t *testing.T, snapDir, walDir string, idx uint64, now int64, want []byte) {
	t.Helper()
	st, err := snapshot.New(snapshot.Config{Dir: filepath.Join(snapDir, "snap"), Retain: 2}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	var payload []byte
	if got, err := st.Load(func(i uint64, p []byte) error {
		payload = bytes.Clone(p)
		return nil
	}); err != nil || got != idx {
		t.Fatalf("load snapshot = %d, %v; want %d", got, err, idx)
	}
	cfg := wal.DefaultConfig()
	cfg.Path, cfg.NoSync = filepath.Join(walDir, "wal.db"), true
	l, err := wal.Open(cfg, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	acc, err := accounts.New(accounts.DefaultConfig()) // for its offline images
	if err != nil {
		t.Fatal(err)
	}
	for _, back := range []uint64{0, 1, 3, 10, 40, idx} {
		from := idx - min(back, idx)
		got, err := keys.ReplayCanonical(payload, l, from, now, acc)
		if err != nil {
			t.Fatalf("replay from %d: %v", from, err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("snapshot at %d, then the WAL after %d: differs from the live state", idx, from)
		}
	}
	if got, err := keys.ReplayCanonical(nil, l, 0, now, acc); err != nil || !bytes.Equal(got, want) {
		t.Errorf("WAL-only replay differs from the live state (err %v)", err)
	}
	// Cluster mode's snapshots: the image replayed off the actors, encoded
	// as a payload (on several shards), decodes to the live state.
	for _, shards := range []int{1, 5} {
		off, err := keys.OfflinePayload(l, shards, now, acc)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := keys.CanonicalImage(off, now); err != nil || !bytes.Equal(got, want) {
			t.Errorf("offline image's payload on %d shards differs from the live state (err %v)", shards, err)
		}
	}
}
