package etcdlog

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"gatehouse/actors/cluster/etcdtest"
	"gatehouse/wal"
)

// lockedBuffer collects a logger's output across goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (w *lockedBuffer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *lockedBuffer) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// authedLog opens writer's log under prefix with its metrics on a fresh
// registry and its log in a buffer.
func authedLog(t *testing.T, cli *clientv3.Client, prefix, writer string, auth Auth) (*Log, *lockedBuffer, *prometheus.Registry) {
	t.Helper()
	buf := &lockedBuffer{}
	reg := prometheus.NewRegistry()
	auth.Logger, auth.Registerer = slog.New(slog.NewTextHandler(buf, nil)), reg
	l, err := Open(context.Background(), cli, prefix, writer, timeout, auth)
	if err != nil {
		t.Fatal(err)
	}
	return l, buf, reg
}

func rejected(t *testing.T, l *Log, kind string) int {
	t.Helper()
	var m dto.Metric
	if err := l.auth.rejected.WithLabelValues(kind).Write(&m); err != nil {
		t.Fatal(err)
	}
	return int(m.GetCounter().GetValue())
}

// forge writes value at key with a client that has etcd access but not
// the master key.
func forge(t *testing.T, cli *clientv3.Client, key string, value []byte) {
	t.Helper()
	if _, err := cli.Put(context.Background(), key, string(value)); err != nil {
		t.Fatal(err)
	}
}

// legacyEntry is an entry as written before the log was authenticated:
// version 1, a valid CRC, no MAC.
func legacyEntry(recs ...wal.Record) []byte {
	return append([]byte{legacyVersion, 0}, encodeBatch(recs)...)
}

// TestForgedEntryNotDelivered: entries put into etcd by a client without
// the master key (one without a MAC but a valid CRC, one MACed under
// another key, one under a name no node writes) are never delivered by
// Replay nor Follow; each is counted, the log warns once per writer
// name, and Follow delivers the genuine entries around them (Replay, at
// a node's start, stops at the pre-MAC one: ErrLegacy).
func TestForgedEntryNotDelivered(t *testing.T) {
	c := etcdtest.Start(t, 1)
	cli := c.Client(t)
	l, logs, _ := authedLog(t, cli, "/f", "node-a", Auth{MasterKey: testKey})
	if _, err := l.Append(context.Background(), rec("one")); err != nil {
		t.Fatal(err)
	}
	admin := wal.Record{Type: 7, Data: []byte(`{"role":"admin"}`)}
	forge(t, cli, "/f/log/node-a/00000000000000000099", legacyEntry(admin))
	forge(t, cli, "/f/log/node-a/00000000000000000098", legacyEntry(admin))
	other, err := newAuthenticator(Auth{MasterKey: bytes.Repeat([]byte{7}, 32)})
	if err != nil {
		t.Fatal(err)
	}
	v := append([]byte{entryVersion, 0}, encodeBatch([]wal.Record{admin})...)
	forge(t, cli, "/f/log/node-b/00000000000000000001", append(v, other.mac(macEntry, "node-b", 1, v)...))
	forge(t, cli, "/f/log/garbage", []byte{entryVersion, 1, 0xff})
	last, err := l.Append(context.Background(), rec("two"))
	if err != nil {
		t.Fatal(err)
	}

	// At a node's start, an entry in the pre-MAC format stops Replay
	// (an upgrade needs cluster.etcd.accept_unauthenticated), after
	// delivering only the genuine entry before it.
	var got []string
	_, err = l.Replay(context.Background(), 0, func(_ uint64, _ string, r wal.Record) error {
		got = append(got, string(r.Data))
		return nil
	})
	if !errors.Is(err, ErrLegacy) || !errors.Is(err, ErrForged) || strings.Join(got, ",") != "one" {
		t.Fatalf("Replay = %q, %v; want one, then ErrLegacy", got, err)
	}
	// Follow skips every forged entry and delivers the genuine ones.
	out := follow(t, l, 0, 2)
	if string(out[0].rec.Data) != "one" || string(out[1].rec.Data) != "two" || out[1].seq != last {
		t.Fatalf("Follow delivered %q, %q, want only the genuine one, two", out[0].rec.Data, out[1].rec.Data)
	}
	if n := rejected(t, l, "entry"); n != 5 {
		t.Errorf("gatehouse_etcdlog_rejected_total{kind=entry} = %d, want 5 (1 by Replay, 4 by Follow)", n)
	}

	// Live: a forged entry then a genuine one; Follow delivers the genuine.
	forge(t, cli, "/f/log/node-b/00000000000000000002", legacyEntry(admin))
	if _, err := l.Append(context.Background(), rec("three")); err != nil {
		t.Fatal(err)
	}
	out = follow(t, l, last, 1)
	if string(out[0].rec.Data) != "three" {
		t.Fatalf("Follow delivered %q first, want the genuine %q", out[0].rec.Data, "three")
	}
	if n := rejected(t, l, "entry"); n != 6 {
		t.Errorf("gatehouse_etcdlog_rejected_total{kind=entry} = %d, want 6", n)
	}
	for _, w := range []string{"writer=node-a", "writer=node-b", `writer=""`} {
		if n := strings.Count(logs.String(), w+" "); n != 1 {
			t.Errorf("%d warnings for %s, want 1 (one per writer):\n%s", n, w, logs)
		}
	}
}

// TestLegacyEntryAcceptedOnlyWhenAsked: an entry written before the log
// was authenticated (version 1) applies when AcceptUnauthenticated says
// so (the upgrade of a cluster), and entries written now verify.
func TestLegacyEntryAcceptedOnlyWhenAsked(t *testing.T) {
	c := etcdtest.Start(t, 1)
	cli := c.Client(t)
	forge(t, cli, "/u/log/old/00000000000000000001", legacyEntry(rec("old")))
	l, _, _ := authedLog(t, cli, "/u", "new", Auth{MasterKey: testKey, AcceptUnauthenticated: true})
	if _, err := l.Append(context.Background(), rec("new")); err != nil {
		t.Fatal(err)
	}
	var got []string
	if _, err := l.Replay(context.Background(), 0, func(_ uint64, _ string, r wal.Record) error {
		got = append(got, string(r.Data))
		return nil
	}); err != nil || strings.Join(got, ",") != "old,new" {
		t.Fatalf("Replay = %q, %v; want old,new", got, err)
	}
	out := follow(t, l, 0, 2)
	if string(out[0].rec.Data) != "old" || string(out[1].rec.Data) != "new" {
		t.Fatalf("Follow = %q, %q, want old, new", out[0].rec.Data, out[1].rec.Data)
	}
}

// TestLargeBatchAuthenticated: a batch in parts verifies, and a part
// replaced by a client without the master key (with the batch's CRC
// kept: same length, the CRC is not a MAC) makes the entry refused.
func TestLargeBatchAuthenticated(t *testing.T) {
	c := etcdtest.Start(t, 1)
	cli := c.Client(t)
	l, _, _ := authedLog(t, cli, "/p", "w", Auth{MasterKey: testKey})
	big := wal.Record{Type: 7, Data: bytes.Repeat([]byte("a"), MaxValue+10)}
	if _, err := l.Append(context.Background(), big); err != nil {
		t.Fatal(err)
	}
	if got := follow(t, l, 0, 1); !bytes.Equal(got[0].rec.Data, big.Data) {
		t.Fatal("the batch in parts did not come back whole")
	}
	// Tamper: rewrite the entry with a part list whose CRC matches a forged
	// body, keeping the MAC.
	entryKey := "/p/log/w/" + "00000000000000000001"
	resp, err := cli.Get(context.Background(), entryKey)
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("get %s: %v", entryKey, err)
	}
	forgedBody := encodeBatch([]wal.Record{{Type: 7, Data: []byte("admin")}})
	forge(t, cli, "/p/part/w/00000000000000000002/000000", forgedBody)
	hdr := []byte{entryVersion, 1}
	hdr = binary.AppendUvarint(hdr, 1)
	hdr = binary.AppendUvarint(hdr, uint64(len(forgedBody)))
	hdr = binary.BigEndian.AppendUint32(hdr, crc32.Checksum(forgedBody, castagnoli))
	v := resp.Kvs[0].Value
	forge(t, cli, "/p/log/w/00000000000000000002", append(hdr, v[len(v)-macSize:]...))
	if _, err := l.Append(context.Background(), rec("after")); err != nil {
		t.Fatal(err)
	}
	if got := follow(t, l, got0(t, l), 1); string(got[0].rec.Data) != "after" {
		t.Fatalf("Follow delivered %q, want the genuine %q", got[0].rec.Data, "after")
	}
	if n := rejected(t, l, "entry"); n != 1 {
		t.Errorf("gatehouse_etcdlog_rejected_total{kind=entry} = %d, want 1", n)
	}
}

// got0 is the sequence number of the log's first batch's record.
func got0(t *testing.T, l *Log) uint64 {
	t.Helper()
	return follow(t, l, 0, 1)[0].seq
}

// TestForgedSnapshotRefused: a snapshot pointer written by a client
// without the master key (without a MAC and a valid CRC, or MACed under
// another key) is refused by Load with ErrForged and counted; a genuine
// snapshot saved after it loads.
func TestForgedSnapshotRefused(t *testing.T) {
	c := etcdtest.Start(t, 1)
	cli := c.Client(t)
	l, logs, _ := authedLog(t, cli, "/s/wal/", "node-a", Auth{MasterKey: testKey})
	s := l.Snapshots(2 * time.Second)
	save(t, s, 10, []byte("genuine"))
	mustLoad(t, s, 10, []byte("genuine"))

	payload := []byte(`{"users":[{"role":"admin"}]}`)
	forge(t, cli, "/s/wal/snap/00000000000000000020/000000", payload)
	legacy := []byte{legacySnapshotVersion}
	for _, x := range []uint64{20, uint64(len(payload)), 1, uint64(time.Now().UnixMilli())} {
		legacy = binary.AppendUvarint(legacy, x)
	}
	legacy = binary.BigEndian.AppendUint32(legacy, crc32.Checksum(payload, castagnoli))
	forge(t, cli, "/s/wal/snapshot", legacy)
	if _, _, err := s.Load(context.Background()); !errors.Is(err, ErrForged) {
		t.Fatalf("Load of a pointer without a MAC = %v, want ErrForged", err)
	}
	other, err := newAuthenticator(Auth{MasterKey: bytes.Repeat([]byte{7}, 32)})
	if err != nil {
		t.Fatal(err)
	}
	info := SnapshotInfo{Pos: 20, Size: len(payload), Chunks: 1, Taken: time.Now(), Writer: "node-a", sum: crc32.Checksum(payload, castagnoli)}
	forge(t, cli, "/s/wal/snapshot", info.encode(other, payload))
	if _, _, err := s.Load(context.Background()); !errors.Is(err, ErrForged) {
		t.Fatalf("Load of a pointer MACed under another key = %v, want ErrForged", err)
	}
	if n := rejected(t, l, "snapshot"); n != 2 {
		t.Errorf("gatehouse_etcdlog_rejected_total{kind=snapshot} = %d, want 2", n)
	}
	if !strings.Contains(logs.String(), "refused an unauthenticated snapshot") {
		t.Errorf("no warning for the forged snapshot:\n%s", logs)
	}
	save(t, s, 30, []byte("genuine again"))
	mustLoad(t, s, 30, []byte("genuine again"))
}

// FuzzAuthenticatedDecoders: a snapshot pointer and an inline entry, as a
// client of etcd may write them, never panic the decoders: they verify
// or are refused (ErrForged, ErrCorrupt).
func FuzzAuthenticatedDecoders(f *testing.F) {
	a, err := newAuthenticator(Auth{MasterKey: testKey})
	if err != nil {
		f.Fatal(err)
	}
	info := SnapshotInfo{Pos: 20, Size: 3, Chunks: 1, Taken: time.UnixMilli(1), Writer: "w"}
	f.Add(info.encode(a, []byte("abc")))
	v := append([]byte{entryVersion, 0}, encodeBatch([]wal.Record{rec("x")})...)
	f.Add(append(v, a.mac(macEntry, "w", 1, v)...))
	f.Add(legacyEntry(rec("y")))
	f.Fuzz(func(t *testing.T, b []byte) {
		if info, err := decodeInfo(b); err == nil && info.signed != nil {
			_ = a.verify(info.mac, macSnapshot, info.Writer, info.Pos, info.signed)
		}
		if len(b) > 1 {
			b[1] = 0 // inline: a batch in parts reads etcd
		}
		l := &Log{auth: a}
		body, err := l.entryBody(context.Background(), &mvccpb.KeyValue{Key: []byte("/f/log/w/1"), Value: b}, "w", 1)
		if err == nil {
			_, _ = decodeBatch(body)
		}
	})
}

// BenchmarkEntryMAC1K and BenchmarkEntryMAC64K: the cost the MAC adds to
// an Append (and to a follower's delivery) of a batch of that size.
func BenchmarkEntryMAC1K(b *testing.B)  { benchEntryMAC(b, 1<<10) }
func BenchmarkEntryMAC64K(b *testing.B) { benchEntryMAC(b, 64<<10) }

func benchEntryMAC(b *testing.B, size int) {
	a, err := newAuthenticator(Auth{MasterKey: testKey})
	if err != nil {
		b.Fatal(err)
	}
	v := append([]byte{entryVersion, 0}, encodeBatch([]wal.Record{{Type: 7, Data: make([]byte, size)}})...)
	b.ReportAllocs()
	b.SetBytes(int64(len(v)))
	for b.Loop() {
		_ = a.mac(macEntry, "node-1", 42, v)
	}
}
