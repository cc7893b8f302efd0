package clusterit_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"gatehouse/actors"
	"gatehouse/actors/accounts"
	"gatehouse/actors/control"
	"gatehouse/actors/gateway"
	"gatehouse/actors/keys"
	"gatehouse/wal/etcdlog"
)

// settle flushes every member's usage and waits until each has applied
// every write any of them acknowledged.
func settle(t *testing.T, ms ...*member) {
	t.Helper()
	for _, m := range ms {
		if err := m.sys.FlushUsage(ctx(t)); err != nil {
			t.Fatal(err)
		}
	}
	var written uint64
	for _, m := range ms {
		written = max(written, m.sys.ClusterWritten())
	}
	for _, m := range ms {
		eventually(t, 5*time.Second, m.id+" applied every write", func() bool { return m.sys.ClusterApplied() >= written })
	}
}

// stateOf is what m holds, as its reads show it: users, their keys, each
// key's usage, whether each session token is valid, and the gateway's and
// the control extension's snapshot sections (every entity, sorted).
func stateOf(t *testing.T, m *member, tokens []string) string {
	t.Helper()
	c := ctx(t)
	var b strings.Builder
	users, err := m.sys.ListUsers(c)
	if err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(users, func(x, y accounts.User) int { return strings.Compare(x.ID.String(), y.ID.String()) })
	for _, u := range users {
		fmt.Fprintf(&b, "user %s %s %s %s %v\n", u.ID, u.Email, u.Role, u.Plan, u.LicenseActive)
		list, err := m.sys.ListKeys(c, u.ID)
		if err != nil {
			t.Fatal(err)
		}
		slices.SortFunc(list, func(x, y keys.KeyInfo) int { return strings.Compare(x.ID.String(), y.ID.String()) })
		for _, k := range list {
			fmt.Fprintf(&b, "  key %+v\n", k)
			u, err := m.sys.KeyUsage(c, k.ID, 2)
			if err != nil {
				t.Fatal(err)
			}
			// Not u.Used: only the key's owner keeps its window (the used
			// hour is checked by admissions).
			fmt.Fprintf(&b, "    usage %v total %d limit %d\n", u.Daily, u.Total, u.Limit)
		}
	}
	for _, tok := range tokens {
		u, err := m.sys.Authenticate(c, tok)
		fmt.Fprintf(&b, "session of %s: %v\n", u.ID, err)
	}
	gw, err := m.gw.Capture(c)
	if err != nil {
		t.Fatal(err)
	}
	ctl, err := m.ctl.Capture(c)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(&b, "gateway %s\ncontrol %s\n", gw, ctl)
	return b.String()
}

func sameStates(t *testing.T, what string, want string, ms ...*member) {
	t.Helper()
	for _, m := range ms {
		if got := stateOf(t, m, nil); got != want {
			t.Errorf("%s: %s's state differs:\n--- want\n%s\n--- got\n%s", what, m.id, want, got)
		}
	}
}

// logEntries counts the replicated log's entries in etcd, those committed
// at or below revision rev when rev > 0 (etcd's count ignores that
// filter: the keys are read).
func logEntries(t *testing.T, cli *clientv3.Client, rev int64) int {
	t.Helper()
	opts := []clientv3.OpOption{clientv3.WithPrefix(), clientv3.WithKeysOnly()}
	if rev > 0 {
		opts = append(opts, clientv3.WithMaxCreateRev(rev))
	}
	resp, err := cli.Get(context.Background(), prefix+"/wal/log/", opts...)
	if err != nil {
		t.Fatal(err)
	}
	return len(resp.Kvs)
}

// writeSome makes changes of every kind through m: a user with a key, a
// gateway provider and agent, a control token and service.
func writeSome(t *testing.T, m *member, tag string) keys.KeyInfo {
	t.Helper()
	c := ctx(t)
	k, _ := newKey(t, m, 1000)
	if _, err := m.gw.CreateProvider(c, gateway.ProviderInput{Name: "p-" + tag, ProviderType: gateway.ProviderEcho, Enabled: true}); err != nil {
		t.Fatal(err)
	}
	agent, prov, model := "agent-"+tag, "p-"+tag, "m"
	if _, err := m.gw.CreateAgent(c, "alice", gateway.AgentInput{AgentKey: &agent, Provider: &prov, Model: &model}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := m.ctl.CreateToken(c, control.NewToken{UserID: k.Owner, Name: "t-" + tag, Scopes: []control.Scope{control.ScopeRead}}); err != nil {
		t.Fatal(err)
	}
	if _, err := m.ctl.CreateService(c, "s-"+tag, control.ServiceInput{Upstream: "http://127.0.0.1:9", Enabled: true}); err != nil {
		t.Fatal(err)
	}
	return k
}

// TestSnapshotsTruncateAndRestore: records written across three nodes,
// two snapshots taken by two nodes (the second truncates the log below
// the first), more records after them; then every node stops, and the
// three restarted and a fourth that never ran restore from the snapshot
// and the log after it: the same users, keys, usage, used hour, sessions,
// gateway entities and control state as before. A snapshot whose writer
// crashed before its pointer (chunks only) changes nothing, and the next
// snapshot removes its chunks.
func TestSnapshotsTruncateAndRestore(t *testing.T) {
	f := newFleet(t)
	f.exts = true
	a, b, c := f.start("a"), f.start("b"), f.start("c")
	ms := []*member{a, b, c}
	waitOwners(t, ms...)

	used, secret := newKey(t, a, 20)
	for _, m := range ms {
		eventually(t, time.Second, "the key validates on "+m.id, func() bool {
			return m.sys.Validate(context.Background(), []byte(secret)).Err == nil
		})
	}
	if admitted, failed := hammer(t, secret, 10, a, b, c); admitted != 20 || len(failed) > 0 {
		t.Fatalf("admitted %d of 30 for a limit of 20, failures %v", admitted, failed)
	}
	for i, m := range ms {
		writeSome(t, m, fmt.Sprint("1", i))
	}
	settle(t, ms...)
	pos1, err := a.sys.Snapshot()
	if err != nil {
		t.Fatal(err)
	}

	revoked := writeSome(t, b, "2b")
	writeSome(t, c, "2c")
	if err := a.sys.RevokeKey(ctx(t), revoked.ID); err != nil {
		t.Fatal(err)
	}
	settle(t, ms...)
	pos2, err := b.sys.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if pos2 <= pos1 {
		t.Fatalf("second snapshot at %d, first at %d", pos2, pos1)
	}
	if n := logEntries(t, a.cli, etcdlog.Rev(pos1)); n != 0 {
		t.Errorf("%d log entries at or below the first snapshot's position are left after the second", n)
	}
	kept := logEntries(t, a.cli, 0)
	if kept == 0 {
		t.Error("the log after the first snapshot is gone too")
	}

	// After the last snapshot: a user, a key, a login, usage of a key.
	k3 := writeSome(t, c, "3c")
	_, sess, err := a.sys.Login(ctx(t), mustEmail(t, a, k3), "correct horse")
	if err != nil {
		t.Fatal(err)
	}
	settle(t, ms...)
	want := stateOf(t, a, []string{sess.Token})
	if !strings.Contains(want, "session of "+k3.Owner.String()+": <nil>") {
		t.Fatalf("the session is not valid on a:\n%s", want)
	}
	for _, m := range []*member{b, c} {
		if got := stateOf(t, m, []string{sess.Token}); got != want {
			t.Fatalf("before the restart %s differs from a:\n--- a\n%s\n--- %s\n%s", m.id, want, m.id, got)
		}
	}
	t.Logf("snapshots at %d and %d; %d log entries kept; state of %d bytes", pos1, pos2, kept, len(want))

	// A snapshotter that crashed after its chunks, before its pointer.
	orphan := fmt.Sprintf("%s/wal/snap/%020d/000000", prefix, pos2+1<<20)
	if _, err := a.cli.Put(context.Background(), orphan, "half a snapshot"); err != nil {
		t.Fatal(err)
	}

	for _, m := range ms {
		m.stop()
	}
	restarted := []*member{f.start("a"), f.start("b"), f.start("c"), f.start("d")}
	waitOwners(t, restarted...)
	for _, m := range restarted {
		t.Logf("%s restored and started in %v", m.id, m.took)
		if got := stateOf(t, m, []string{sess.Token}); got != want {
			t.Errorf("after the restart %s differs:\n--- before\n%s\n--- %s\n%s", m.id, want, m.id, got)
		}
	}
	again, failed := hammer(t, secret, 3, restarted...)
	if again != 0 || len(failed) > 0 {
		t.Errorf("after the restart %d admitted for the used key (want 0: its hour is used), failures %v", again, failed)
	}
	u, err := restarted[3].sys.KeyUsage(ctx(t), used.ID, 1)
	if err != nil || u.Total != 20 {
		t.Errorf("usage of the used key on d = %+v, %v; want 20", u, err)
	}

	// The next snapshot starts from the last one and removes the orphan.
	d := restarted[3]
	pos3, err := d.sys.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	resp, err := d.cli.Get(context.Background(), prefix+"/wal/snap/", clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range resp.Kvs {
		if !strings.HasPrefix(string(kv.Key), fmt.Sprintf("%s/wal/snap/%020d/", prefix, pos3)) {
			t.Errorf("after the snapshot at %d, etcd still holds %s", pos3, kv.Key)
		}
	}
	if n := logEntries(t, d.cli, etcdlog.Rev(pos2)); n != 0 {
		t.Errorf("%d log entries at or below the second snapshot's position are left after the third", n)
	}
	sameStates(t, "after the third snapshot", stateOf(t, d, nil), restarted...)
}

// mustEmail is the email of k's owner.
func mustEmail(t *testing.T, m *member, k keys.KeyInfo) string {
	t.Helper()
	u, err := m.sys.GetUser(ctx(t), k.Owner)
	if err != nil {
		t.Fatal(err)
	}
	return u.Email
}

// TestSnapshotsTakenByTicker: with a small SnapshotEvery and a 1 s
// interval the nodes' tickers take snapshots while three nodes write (one
// node at a time, under the lock), the last covering every write once
// they stop; the log is truncated behind them, and a node started
// afterwards holds what the others hold.
func TestSnapshotsTakenByTicker(t *testing.T) {
	f := newFleet(t)
	f.tune = func(c *actors.Config) { c.SnapshotEvery, c.SnapshotInterval = 10, time.Second }
	ms := []*member{f.start("a"), f.start("b"), f.start("c")}
	waitOwners(t, ms...)
	const users = 12
	for i := range users {
		newKey(t, ms[i%3], 100)
	}
	settle(t, ms...)
	l, err := etcdlog.Open(context.Background(), ms[0].cli, prefix+"/wal/", "probe", time.Second, etcdlog.Auth{MasterKey: f.key})
	if err != nil {
		t.Fatal(err)
	}
	var info etcdlog.SnapshotInfo
	written := ms[0].sys.ClusterWritten()
	for _, m := range ms {
		written = max(written, m.sys.ClusterWritten())
	}
	eventually(t, 10*time.Second, "a snapshot holding every write", func() bool {
		info, err = l.Snapshots(ttl).Latest(context.Background())
		return err == nil && info.Pos >= written
	})
	t.Logf("latest snapshot at %d (%d bytes in %d chunks); %d log entries left", info.Pos, info.Size, info.Chunks, logEntries(t, ms[0].cli, 0))
	d := f.start("d")
	us, err := d.sys.ListUsers(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(us) != users {
		t.Errorf("a node started after the snapshots has %d users, want %d", len(us), users)
	}
}

// TestFollowerBehindTheCutStops: a node cut off from etcd while the others
// take two snapshots (the second truncates the log past its position)
// cannot follow when etcd is back: it reports ErrCompacted through
// Fatal and /health, and started again it restores from the snapshot.
func TestFollowerBehindTheCutStops(t *testing.T) {
	f := newFleet(t)
	a, b := f.start("a"), f.start("b")
	f.endpoints = []string{f.etcd.Endpoint(2)}
	d := f.start("d")
	f.endpoints = nil
	waitOwners(t, a, b, d)
	newKey(t, a, 100)
	settle(t, a, b, d)
	f.etcd.Kill(2) // d's only member
	newKey(t, a, 100)
	if _, err := a.sys.Snapshot(); err != nil {
		t.Fatal(err)
	}
	newKey(t, b, 100)
	if _, err := b.sys.Snapshot(); err != nil {
		t.Fatal(err)
	}
	if d.sys.Health() != nil {
		t.Fatalf("d unhealthy before it reached etcd again: %v", d.sys.Health())
	}
	f.etcd.Restart(t, 2)
	select {
	case err := <-d.fatal:
		if !errors.Is(err, etcdlog.ErrCompacted) {
			t.Fatalf("d's fatal error = %v, want ErrCompacted", err)
		}
		t.Logf("d stopped following: %v", err)
	case <-time.After(20 * time.Second):
		t.Fatal("d did not report that it fell behind the cut")
	}
	if err := d.sys.Health(); !errors.Is(err, actors.ErrUnavailable) {
		t.Errorf("d's health = %v, want ErrUnavailable", err)
	}
	d.stop()
	d = f.start("d")
	us, err := d.sys.ListUsers(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(us) != 3 {
		t.Errorf("d restarted has %d users, want 3", len(us))
	}
}

// TestSnapshotFigures measures, for GATEHOUSE_SNAPSHOT_KEYS keys (unset:
// skipped), a snapshot's size and time and a node's start with the whole
// log replayed and from the snapshot.
func TestSnapshotFigures(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("GATEHOUSE_SNAPSHOT_KEYS"))
	if n == 0 {
		t.Skip("set GATEHOUSE_SNAPSHOT_KEYS to measure")
	}
	f := newFleetOf(t, 1)
	f.tuneAccounts = func(c *accounts.Config) { c.MaxKeys[accounts.PlanPremium] = 1_000_000 }
	a := f.start("a")
	waitOwners(t, a)
	const workers = 8 // each its own user: a user's key creations run one at a time
	start := time.Now()
	var wg sync.WaitGroup
	var failed atomic.Int64
	for w := range workers {
		u, err := a.sys.CreateUser(ctx(t), accounts.NewUser{Email: fmt.Sprintf("figures%d@example.com", w), Password: "correct horse", Plan: accounts.PlanPremium, LicenseActive: true})
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			for i := w; i < n; i += workers {
				if _, _, err := a.sys.CreateKey(context.Background(), keys.NewKey{Owner: a.sys.KeyOwner(u), Name: fmt.Sprint("k", i)}); err != nil {
					failed.Add(1) // a measurement: counted, not a failure
				}
			}
		})
	}
	wg.Wait()
	t.Logf("%d keys created in %v (%d creations failed)", n-int(failed.Load()), time.Since(start), failed.Load())
	settle(t, a)
	before := f.start("b")
	t.Logf("start replaying the whole log (%d entries): %v", logEntries(t, a.cli, 0), before.took)
	start = time.Now()
	pos, err := a.sys.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	l, err := etcdlog.Open(context.Background(), a.cli, prefix+"/wal/", "probe", time.Second, etcdlog.Auth{MasterKey: f.key})
	if err != nil {
		t.Fatal(err)
	}
	info, err := l.Snapshots(ttl).Latest(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("snapshot at %d: %d bytes in %d chunks, taken in %v", pos, info.Size, info.Chunks, took)
	after := f.start("c")
	t.Logf("start from the snapshot: %v", after.took)
}
