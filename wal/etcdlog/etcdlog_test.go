package etcdlog

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"sync"
	"testing"
	"time"

	"gatehouse/actors/cluster/etcdtest"
	"gatehouse/wal"
)

const timeout = 3 * time.Second

// testKey is the tests' master key.
var testKey = bytes.Repeat([]byte{0x42}, 32)

func open(t *testing.T, c *etcdtest.Cluster, member int, prefix, writer string) *Log {
	t.Helper()
	l, err := Open(context.Background(), c.Client(t, c.Endpoint(member)), prefix, writer, timeout, Auth{MasterKey: testKey})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

type got struct {
	seq uint64
	rec wal.Record
}

// follow collects what Follow delivers until n records arrived.
func follow(t *testing.T, l *Log, after uint64, n int) []got {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out []got
	stop := errors.New("enough")
	err := l.Follow(ctx, after, func(seq uint64, _ string, rec wal.Record) error {
		out = append(out, got{seq, rec})
		if len(out) == n {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) {
		t.Fatalf("follow: %v after %d of %d records", err, len(out), n)
	}
	return out
}

func rec(s string) wal.Record { return wal.Record{Type: 7, Data: []byte(s)} }

// TestOneOrderForEveryone: two writers on different members append
// concurrently; two followers on a third see every record once, in the
// same order, with growing sequence numbers, and every acknowledged
// sequence number is the record's.
func TestOneOrderForEveryone(t *testing.T) {
	c := etcdtest.Start(t, 3)
	a, b := open(t, c, 0, "/t", "a"), open(t, c, 1, "/t", "b")
	acked := sync.Map{} // seq → data
	var wg sync.WaitGroup
	for _, l := range []*Log{a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 50 {
				recs := []wal.Record{rec(fmt.Sprintf("%s-%d-x", l.writer, i)), rec(fmt.Sprintf("%s-%d-y", l.writer, i))}
				last, err := l.Append(context.Background(), recs...)
				if err != nil {
					t.Error(err)
					return
				}
				acked.Store(last, string(recs[1].Data))
			}
		}()
	}
	wg.Wait()
	f1 := follow(t, open(t, c, 2, "/t", "f1"), 0, 200)
	f2 := follow(t, open(t, c, 2, "/t", "f2"), 0, 200)
	if !reflect.DeepEqual(f1, f2) {
		t.Fatal("two followers saw different orders")
	}
	seen := map[string]bool{}
	for i, g := range f1 {
		if i > 0 && g.seq <= f1[i-1].seq {
			t.Fatalf("sequence numbers do not grow: %d then %d", f1[i-1].seq, g.seq)
		}
		if seen[string(g.rec.Data)] {
			t.Fatalf("%s delivered twice", g.rec.Data)
		}
		seen[string(g.rec.Data)] = true
		if want, ok := acked.Load(g.seq); ok && want != string(g.rec.Data) {
			t.Fatalf("seq %d acknowledged for %s, delivered %s", g.seq, want, g.rec.Data)
		}
	}
	// Each writer's batches keep its own order.
	last := map[string]int{}
	for _, g := range f1 {
		var w string
		var i int
		fmt.Sscanf(string(bytes.ReplaceAll(g.rec.Data, []byte("-"), []byte(" "))), "%s %d", &w, &i)
		if i < last[w] {
			t.Fatalf("%s's batch %d after %d", w, i, last[w])
		}
		last[w] = i
	}
}

// TestFollowLiveAndFromTheMiddle: a follower from the middle gets only
// what follows, and sees appends made while it follows.
func TestFollowLiveAndFromTheMiddle(t *testing.T) {
	c := etcdtest.Start(t, 1)
	l := open(t, c, 0, "/m", "w")
	ctx := context.Background()
	var mid uint64
	for i := range 10 {
		s, err := l.Append(ctx, rec(fmt.Sprint(i)))
		if err != nil {
			t.Fatal(err)
		}
		if i == 4 {
			mid = s
		}
	}
	go func() {
		time.Sleep(200 * time.Millisecond)
		l.Append(ctx, rec("live-1"), rec("live-2"))
	}()
	out := follow(t, open(t, c, 0, "/m", "r"), mid, 7)
	var data []string
	for _, g := range out {
		data = append(data, string(g.rec.Data))
	}
	if want := []string{"5", "6", "7", "8", "9", "live-1", "live-2"}; !reflect.DeepEqual(data, want) {
		t.Fatalf("followed %v, want %v", data, want)
	}
}

// TestLargeBatch: a batch over MaxValue is written in parts and comes back
// whole.
func TestLargeBatch(t *testing.T) {
	c := etcdtest.Start(t, 1)
	l := open(t, c, 0, "/big", "w")
	big := make([]byte, 3*MaxValue+123)
	for i := range big {
		big[i] = byte(rand.IntN(256))
	}
	if _, err := l.Append(context.Background(), rec("small"), wal.Record{Type: 9, Data: big}); err != nil {
		t.Fatal(err)
	}
	out := follow(t, l, 0, 2)
	if out[1].rec.Type != 9 || !bytes.Equal(out[1].rec.Data, big) {
		t.Fatalf("large record came back as %d bytes", len(out[1].rec.Data))
	}
	// Truncating removes the entry and its parts.
	n, err := l.Truncate(context.Background(), Seq(Rev(out[1].seq)+1, 0))
	if err != nil || n != 1 {
		t.Fatalf("truncate = %d, %v", n, err)
	}
	resp, err := l.cli.Get(context.Background(), "/big/", clientRangeAll()...)
	if err != nil || resp.Count != 1 { // the cut's marker
		t.Fatalf("after truncate %d keys left, %v", resp.Count, err)
	}
}

// TestAppendNeverTwice: a retried append under the same name lands once
// (and a name holding another value is not taken for it); a reopened
// writer continues its counter.
func TestAppendNeverTwice(t *testing.T) {
	c := etcdtest.Start(t, 1)
	l := open(t, c, 0, "/r", "w")
	ctx := context.Background()
	s1, err := l.Append(ctx, rec("one"))
	if err != nil {
		t.Fatal(err)
	}
	// The same name and value again, as a retry after an unknown outcome
	// would; another value under that name is not this writer's.
	resp, err := l.cli.Get(ctx, l.entryKey(1))
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("get %s: %v", l.entryKey(1), err)
	}
	rev, err := l.create(ctx, l.entryKey(1), resp.Kvs[0].Value)
	if err != nil || rev != Rev(s1) {
		t.Fatalf("retry = %d, %v; want the first write's revision %d", rev, err, Rev(s1))
	}
	if _, err := l.create(ctx, l.entryKey(1), []byte{entryVersion, 0}); !errors.Is(err, errTaken) {
		t.Fatalf("create under a name holding another value = %v, want errTaken", err)
	}
	again := open(t, c, 0, "/r", "w")
	if again.n != 1 {
		t.Fatalf("reopened writer's counter = %d, want 1", again.n)
	}
	if _, err := again.Append(ctx, rec("two")); err != nil {
		t.Fatal(err)
	}
	out := follow(t, again, 0, 2)
	if string(out[0].rec.Data) != "one" || string(out[1].rec.Data) != "two" {
		t.Fatalf("followed %q, %q", out[0].rec.Data, out[1].rec.Data)
	}
}

// TestFollowAfterCompaction: a follower from before etcd's compaction is
// told to restore from a snapshot.
func TestFollowAfterCompaction(t *testing.T) {
	c := etcdtest.Start(t, 1)
	l := open(t, c, 0, "/c", "w")
	ctx := context.Background()
	first, _ := l.Append(ctx, rec("a"))
	l.Append(ctx, rec("b"))
	last, _ := l.Append(ctx, rec("c"))
	if _, err := l.Truncate(ctx, last); err != nil { // keeps c's batch
		t.Fatal(err)
	}
	if _, err := l.cli.Compact(ctx, Rev(last)); err != nil {
		t.Fatal(err)
	}
	err := l.Follow(ctx, first, func(uint64, string, wal.Record) error { return nil })
	if !errors.Is(err, ErrCompacted) {
		t.Fatalf("follow from before the compaction = %v, want ErrCompacted", err)
	}
	out := follow(t, l, last-1, 1)
	if string(out[0].rec.Data) != "c" {
		t.Fatalf("follow from the kept part = %q", out[0].rec.Data)
	}
}

// TestNoAcknowledgedAppendLostAcrossLeaderKill: appends run while the
// etcd leader is killed; every acknowledged one is there afterwards.
func TestNoAcknowledgedAppendLostAcrossLeaderKill(t *testing.T) {
	c := etcdtest.Start(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	leader := c.WaitLeader(ctx)
	other := (leader + 1) % 3
	l, err := Open(ctx, c.Client(t, c.Endpoint(other), c.Endpoint((leader+2)%3)), "/k", "w", timeout, Auth{MasterKey: testKey})
	if err != nil {
		t.Fatal(err)
	}
	var acked []string
	for i := range 60 {
		if i == 20 {
			c.Kill(leader)
		}
		actx, acancel := context.WithTimeout(ctx, 10*time.Second)
		_, err := l.Append(actx, rec(fmt.Sprint(i)))
		acancel()
		if err == nil {
			acked = append(acked, fmt.Sprint(i))
		}
	}
	if len(acked) < 55 {
		t.Errorf("only %d of 60 appends acknowledged across a leader kill", len(acked))
	}
	out := follow(t, l, 0, len(acked))
	have := map[string]bool{}
	for _, g := range out {
		have[string(g.rec.Data)] = true
	}
	for _, a := range acked {
		if !have[a] {
			t.Errorf("acknowledged append %s lost", a)
		}
	}
}

func FuzzDecodeBatch(f *testing.F) {
	f.Add(encodeBatch([]wal.Record{rec("a"), {Type: 3, Data: nil}}))
	f.Fuzz(func(t *testing.T, b []byte) {
		recs, err := decodeBatch(b)
		if err != nil {
			return
		}
		again, err := decodeBatch(encodeBatch(recs))
		if err != nil || !reflect.DeepEqual(normalize(again), normalize(recs)) {
			t.Fatalf("round trip: %v", err)
		}
	})
}

func normalize(rs []wal.Record) []wal.Record {
	for i := range rs {
		if len(rs[i].Data) == 0 {
			rs[i].Data = nil
		}
	}
	return rs
}
