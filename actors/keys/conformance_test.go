package keys_test

import (
	"bytes"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"gatehouse/actors"
	"gatehouse/actors/accounts"
	"gatehouse/actors/actorstest"
	"gatehouse/actors/keys"
	"gatehouse/wal"
)

// TestConformance runs the Extension conformance suite (restore, offline
// image, replay rule at every cut, live apply) on the keys over
// keysScript, which writes every record kind they own: creations,
// rotations, revocations, deletions, updates, a key's usage (FlushUsage:
// 15) and a shard's batch (the ticker's flush: 16). Besides the suite,
// each step checks the kinds it wrote, and after each restart (and on
// the follower after each live apply) every key answers GetKey and
// Validate as before (or as on the writer).
func TestConformance(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex // the checks run in parallel
	drivers := map[*actorstest.Node]*keysDriver{}
	driverOf := func(n *actorstest.Node) *keysDriver {
		mu.Lock()
		defer mu.Unlock()
		return drivers[n]
	}
	actorstest.Conformance(t, actorstest.Domain{
		Start: func(tb testing.TB, opts ...actorstest.Option) (*actorstest.Node, actorstest.Driver) {
			d := &keysDriver{n: actorstest.New(tb, opts...), keys: map[string]keys.KeyInfo{}, secrets: map[string][]string{}}
			d.n.Start()
			mu.Lock()
			drivers[d.n] = d
			mu.Unlock()
			return d.n, d
		},
		Ext:      func(n *actorstest.Node) actors.Extension { return n.Sys.Keys },
		Steps:    len(keysScript),
		Canon:    canonKeys,
		LiveOnce: true, // usage adds up: cluster mode delivers each record once
		Kind:     keysKind,
		Covers:   []string{"10 key created", "11 key rotated", "12 key revoked", "13 key deleted", "14 key updated", "15 key usage", "16 usage batch"},
		Observe: func(tb testing.TB, n *actorstest.Node) any {
			return driverOf(n).answers(tb, n)
		},
		AfterRestore: func(tb testing.TB, what string, before any, n *actorstest.Node) {
			if diff := cmp.Diff(before, driverOf(n).answers(tb, n)); diff != "" {
				tb.Errorf("%s: the keys answer differently (-live +restored):\n%s", what, diff)
			}
		},
		AfterApply: func(tb testing.TB, what string, w, f *actorstest.Node) {
			d := driverOf(w) // the follower is asked about the writer's keys
			if diff := cmp.Diff(d.answers(tb, w), d.answers(tb, f)); diff != "" {
				tb.Errorf("%s: the follower answers differently (-writer +follower):\n%s", what, diff)
			}
		},
	})
}

// keysKind is a key record's type and name ("10 key created"); "" for
// the accounts' records the script writes too.
func keysKind(r wal.Record) string {
	name, _, ok := keys.DescribeRecord(r.Type, r.Data)
	if !ok {
		return ""
	}
	return fmt.Sprint(r.Type, " ", name)
}

// canonKeys is the canonical form of a keys' section (keys.CanonicalImage:
// ordered by id, windows at the fake clock's time, which the script never
// moves).
func canonKeys(tb testing.TB, section []byte) []byte {
	var payload bytes.Buffer
	if err := actors.WriteSnapshot(&payload, []actors.Section{{Name: "keys", Parts: [][]byte{section}}}); err != nil {
		tb.Fatal(err)
	}
	c, err := keys.CanonicalImage(payload.Bytes(), actorstest.T0.Unix())
	if err != nil {
		tb.Fatalf("canonical keys section: %v", err)
	}
	return c
}

// keysDriver runs keysScript on one node, reading its running system at
// every step (the suite restarts the node between steps).
type keysDriver struct {
	n       *actorstest.Node
	owner   accounts.User
	keys    map[string]keys.KeyInfo // by name
	secrets map[string][]string     // every secret each key was given, newest last
}

// keyStep is one command of keysScript and the kinds it must write.
type keyStep struct {
	run   func(tb testing.TB, d *keysDriver, s actorstest.System)
	kinds []string
}

const (
	kCreated = "10 key created"
	kRotated = "11 key rotated"
	kRevoked = "12 key revoked"
	kDeleted = "13 key deleted"
	kUpdated = "14 key updated"
	kUsage   = "15 key usage"
	kBatch   = "16 usage batch"
)

var keysScript = []keyStep{
	{func(tb testing.TB, d *keysDriver, s actorstest.System) {
		d.owner = mustUser(tb, s, "owner@example.com", accounts.PlanPremium, true)
		d.create(tb, s, "k1")
	}, []string{kCreated}},
	{func(tb testing.TB, d *keysDriver, s actorstest.System) {
		d.create(tb, s, "k2")
		d.auth(tb, s, "k1", 3)
		d.auth(tb, s, "k2", 1)
		d.tickAndSettle(tb, s)
	}, []string{kCreated, kBatch}},
	{func(tb testing.TB, d *keysDriver, s actorstest.System) { d.rotate(tb, s, "k1") }, []string{kRotated}},
	{func(tb testing.TB, d *keysDriver, s actorstest.System) {
		d.auth(tb, s, "k1", 2)
		if r := s.Authorize(ctx(tb), []byte(d.secrets["k1"][0])); r.Err != nil { // the old secret, in its grace
			tb.Fatalf("old secret: %v", r.Err)
		}
		d.settle(tb, s)
	}, []string{kUsage}},
	{func(tb testing.TB, d *keysDriver, s actorstest.System) {
		name, limit := "renamed", int64(50)
		d.update(tb, s, "k2", keys.KeyPatch{Name: &name, RateLimit: &limit})
	}, []string{kUpdated}},
	{func(tb testing.TB, d *keysDriver, s actorstest.System) {
		d.auth(tb, s, "k2", 2)
		d.tickAndSettle(tb, s)
	}, []string{kBatch}},
	{func(tb testing.TB, d *keysDriver, s actorstest.System) {
		if err := s.RevokeKey(ctx(tb), d.keys["k2"].ID); err != nil {
			tb.Fatalf("RevokeKey: %v", err)
		}
	}, []string{kRevoked}},
	{func(tb testing.TB, d *keysDriver, s actorstest.System) {
		d.create(tb, s, "k3")
		d.auth(tb, s, "k3", 1)
		d.settle(tb, s)
	}, []string{kCreated, kUsage}},
	{func(tb testing.TB, d *keysDriver, s actorstest.System) { d.delete(tb, s, "k1") }, []string{kDeleted}},
	{func(tb testing.TB, d *keysDriver, s actorstest.System) {
		d.auth(tb, s, "k3", 4)
		d.tickAndSettle(tb, s)
	}, []string{kBatch}},
	{func(tb testing.TB, d *keysDriver, s actorstest.System) {
		exp := actorstest.T0.Add(30 * 24 * time.Hour)
		d.update(tb, s, "k3", keys.KeyPatch{ExpiresAt: &exp})
	}, []string{kUpdated}},
	{func(tb testing.TB, d *keysDriver, s actorstest.System) {
		d.rotate(tb, s, "k3")
		d.auth(tb, s, "k3", 1)
		d.settle(tb, s)
	}, []string{kRotated, kUsage}},
	{func(tb testing.TB, d *keysDriver, s actorstest.System) { d.delete(tb, s, "k2") }, []string{kDeleted}},
}

// Step runs keysScript[i] and checks the kinds of the records it wrote.
func (d *keysDriver) Step(tb testing.TB, i int) {
	tb.Helper()
	last, err := d.n.Log.LastIndex()
	if err != nil {
		tb.Fatal(err)
	}
	keysScript[i].run(tb, d, d.n.Sys)
	var got []string
	if err := d.n.Log.Replay(last, func(_ uint64, r wal.Record) error {
		// A flush writes a batch per shard with usage: one kind for all.
		if k := keysKind(r); k != "" && (k != kBatch || len(got) == 0 || got[len(got)-1] != kBatch) {
			got = append(got, k)
		}
		return nil
	}); err != nil {
		tb.Fatal(err)
	}
	if diff := cmp.Diff(keysScript[i].kinds, got); diff != "" {
		tb.Fatalf("step %d wrote other records (-want +got):\n%s", i, diff)
	}
}

// Settle makes the usage counted so far durable (actorstest.Settler).
func (d *keysDriver) Settle(tb testing.TB) { d.settle(tb, d.n.Sys) }

func (d *keysDriver) settle(tb testing.TB, s actorstest.System) {
	tb.Helper()
	if err := s.FlushUsage(ctx(tb)); err != nil {
		tb.Fatalf("FlushUsage: %v", err)
	}
}

// tickAndSettle flushes as the ticker does (one batch per shard), then
// waits for the batch to commit.
func (d *keysDriver) tickAndSettle(tb testing.TB, s actorstest.System) {
	tb.Helper()
	s.Tick()
	d.settle(tb, s)
}

func (d *keysDriver) create(tb testing.TB, s actorstest.System, name string) {
	tb.Helper()
	k, secret := mustKey(tb, s, d.owner, name)
	d.keys[name], d.secrets[name] = k, []string{secret}
}

func (d *keysDriver) rotate(tb testing.TB, s actorstest.System, name string) {
	tb.Helper()
	k, secret, err := s.RotateKey(ctx(tb), d.keys[name].ID)
	if err != nil {
		tb.Fatalf("RotateKey: %v", err)
	}
	d.keys[name], d.secrets[name] = k, append(d.secrets[name], secret)
}

func (d *keysDriver) update(tb testing.TB, s actorstest.System, name string, p keys.KeyPatch) {
	tb.Helper()
	k, err := s.UpdateKey(ctx(tb), d.keys[name].ID, p)
	if err != nil {
		tb.Fatalf("UpdateKey: %v", err)
	}
	d.keys[name] = k
}

func (d *keysDriver) delete(tb testing.TB, s actorstest.System, name string) {
	tb.Helper()
	if err := s.DeleteKey(ctx(tb), d.keys[name].ID); err != nil {
		tb.Fatalf("DeleteKey: %v", err)
	}
}

func (d *keysDriver) auth(tb testing.TB, s actorstest.System, name string, n int) {
	tb.Helper()
	secrets := d.secrets[name]
	for range n {
		if r := s.Authorize(ctx(tb), []byte(secrets[len(secrets)-1])); r.Err != nil {
			tb.Fatalf("Authorize %s: %v", name, r.Err)
		}
	}
}

// answers is what node n says of every key the script made: GetKey's
// view and each secret's Validate outcome.
func (d *keysDriver) answers(tb testing.TB, n *actorstest.Node) map[string]string {
	tb.Helper()
	out := map[string]string{}
	for name, k := range d.keys {
		info, err := n.Sys.GetKey(ctx(tb), k.ID)
		out[name] = fmt.Sprintf("%v %s %d %v used=%d last=%v exp=%v", err, info.Name, info.RateLimit, info.IsActive,
			info.UsageCount, info.LastUsedAt.Unix(), info.ExpiresAt.Unix())
		for i, sec := range d.secrets[name] {
			r := n.Sys.Validate(ctx(tb), []byte(sec))
			out[fmt.Sprint(name, " secret ", i)] = fmt.Sprintf("%v used=%d", r.Err, r.Limit.Used)
		}
	}
	return out
}
