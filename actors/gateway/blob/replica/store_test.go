package replica

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"gatehouse/actors/gateway/blob"
)

func payload(seed uint64, n int) []byte {
	b := make([]byte, n)
	r := rand.New(rand.NewPCG(seed, seed))
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// peerIndex maps a member id (n1, n2) to its ctl index.
func peerIndex(id string) int { return int(id[1] - '1') }

func read(st *Store, ref blob.Ref) ([]byte, error) {
	rd, err := st.Open(context.Background(), ref)
	if err != nil {
		return nil, err
	}
	defer rd.Close()
	return io.ReadAll(rd)
}

// TestPutCopiesToAnotherMember: a Put returns once the bytes are on this
// node and on exactly one other (the first in the ref's rendezvous order),
// which took them in 256 KiB chunks and verified them.
func TestPutCopiesToAnotherMember(t *testing.T) {
	n0 := setup(t, allMembers(), nil)
	total := 0
	for i, size := range []int{1, ChunkSize - 1, ChunkSize, 3*ChunkSize + 17, 5 << 20} {
		b := payload(uint64(i), size)
		ref, n, err := n0.Put(context.Background(), bytes.NewReader(b), 20<<20)
		if err != nil || n != int64(size) || ref != refOf(b) {
			t.Fatalf("Put(%d bytes) = %s, %d, %v", size, ref, n, err)
		}
		n0.Release(ref)
		total += size
		first := n0.peers(ref)[0].ID
		for _, id := range []string{"n1", "n2"} {
			if got := ctl(t, peerIndex(id), ctlReq{Op: "has", Ref: ref}).Has; got != (id == first) {
				t.Fatalf("%d bytes: copy on %s = %v; want a copy on %s only", size, id, got, first)
			}
		}
	}
	if got := n0.counter(t, "pushes", "ok"); got != 5 {
		t.Fatalf("pushes{ok} = %v, want 5", got)
	}
	in := ctl(t, 0, ctlReq{Op: "counter", Name: "bytes", Labels: []string{"in"}}).Value +
		ctl(t, 1, ctlReq{Op: "counter", Name: "bytes", Labels: []string{"in"}}).Value
	if out := n0.counter(t, "bytes", "out"); in != float64(total) || out != float64(total) {
		t.Fatalf("bytes in (n1+n2) = %v, out (n0) = %v; want %d each", in, out, total)
	}
}

// TestOpenFetchesMissing: a node that lacks a blob fetches it from a
// member that has it, verified, then serves its own copy.
func TestOpenFetchesMissing(t *testing.T) {
	n0 := setup(t, allMembers(), nil)
	b := payload(7, 2<<20+5)
	ref := ctl(t, 1, ctlReq{Op: "put_local", Data: b}).Ref // only on n2
	got, err := read(n0.Store, ref)
	if err != nil || !bytes.Equal(got, b) {
		t.Fatalf("Open on n0: %d bytes, %v", len(got), err)
	}
	if n0.Local().Verify(ref) != nil || n0.counter(t, "fetches", "ok") != 1 {
		t.Fatalf("n0's own copy: %v; fetches{ok} = %v", n0.Local().Verify(ref), n0.counter(t, "fetches", "ok"))
	}
	if got, err := read(n0.Store, ref); err != nil || !bytes.Equal(got, b) || n0.counter(t, "fetches", "ok") != 1 {
		t.Fatalf("second Open: %d bytes, %v, fetches %v; want the local copy", len(got), err, n0.counter(t, "fetches", "ok"))
	}
}

// TestConcurrentOpensFetchOnce: many Opens of one missing blob at once
// transfer it once.
func TestConcurrentOpensFetchOnce(t *testing.T) {
	n0 := setup(t, allMembers(), nil)
	b := payload(9, 3<<20)
	ref := ctl(t, 0, ctlReq{Op: "put_local", Data: b}).Ref
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if got, err := read(n0.Store, ref); err != nil || !bytes.Equal(got, b) {
				t.Errorf("Open: %d bytes, %v", len(got), err)
			}
		}()
	}
	wg.Wait()
	if in, f := n0.counter(t, "bytes", "in"), n0.counter(t, "fetches", "ok"); in != float64(len(b)) || f != 1 {
		t.Fatalf("8 Opens: %v bytes in, %v fetches; want %d bytes, 1 fetch", in, f, len(b))
	}
}

// TestCorruptPeerCopyRefused: a member whose copy does not hash to the
// ref is refused and counted, and the next member's copy taken. With only
// a damaged copy around, Open fails unavailable and stores nothing.
func TestCorruptPeerCopyRefused(t *testing.T) {
	n0 := setup(t, allMembers(), nil)
	b := payload(11, 2*ChunkSize+3)
	ref := refOf(b)
	ctl(t, 0, ctlReq{Op: "put_local", Data: b})
	ctl(t, 1, ctlReq{Op: "put_local", Data: b})
	ctl(t, peerIndex(n0.peers(ref)[0].ID), ctlReq{Op: "damage", Ref: ref}) // the copy n0 asks first
	got, err := read(n0.Store, ref)
	if err != nil || !bytes.Equal(got, b) {
		t.Fatalf("Open on n0: %d bytes, %v", len(got), err)
	}
	if c := n0.counter(t, "peer_failures", "fetch", "corrupt"); c != 1 {
		t.Fatalf("peer_failures{fetch,corrupt} = %v, want 1", c)
	}

	c := payload(12, 1000)
	cref := ctl(t, 0, ctlReq{Op: "put_local", Data: c}).Ref
	ctl(t, 0, ctlReq{Op: "damage", Ref: cref})
	if _, err := read(n0.Store, cref); !errors.Is(err, blob.ErrUnavailable) || !errors.Is(err, blob.ErrCorrupt) {
		t.Fatalf("Open with only a damaged copy around = %v, want ErrUnavailable (ErrCorrupt)", err)
	}
	if _, err := n0.Local().Stat(cref); !errors.Is(err, blob.ErrNotFound) {
		t.Fatalf("n0 stored a damaged copy: Stat = %v", err)
	}
}

// TestPutRefusedWithoutSecondCopy: with no other member alive, or the
// other one down, a Put fails unavailable within its bound and holds
// nothing (a collection removes the local copy).
func TestPutRefusedWithoutSecondCopy(t *testing.T) {
	for _, tc := range []struct {
		name    string
		members []Member
		within  time.Duration
	}{
		{"alone", []Member{{ID: "n0", Addr: "self"}}, 100 * time.Millisecond},
		{"not joined yet", nil, 100 * time.Millisecond},
		{"other member down", []Member{{ID: "n0", Addr: "self"}, {ID: "n1", Addr: deadAddr}}, 2 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n0 := setup(t, tc.members, func(c *Config) { c.PushTimeout = time.Second })
			start := time.Now()
			_, _, err := n0.Put(context.Background(), bytes.NewReader(payload(13, 4096)), 1<<20)
			if !errors.Is(err, blob.ErrUnavailable) {
				t.Fatalf("Put = %v, want ErrUnavailable", err)
			}
			if d := time.Since(start); d > tc.within {
				t.Fatalf("Put refused after %s, want within %s", d, tc.within)
			}
			if n0.counter(t, "pushes", "failed") != 1 {
				t.Fatal("pushes{failed} not counted")
			}
			n, err := n0.Collect(n0.Cut(), func(blob.Ref) bool { return false })
			if err != nil || n != 1 {
				t.Fatalf("Collect after the refused Put = %d, %v; want the unheld local copy removed", n, err)
			}
		})
	}
}

// TestPutSkipsMemberDown: a member down is skipped; the next takes the
// copy.
func TestPutSkipsMemberDown(t *testing.T) {
	b := payload(14, 10_000)
	ref := refOf(b)
	// Whichever member comes first in ref's order is down.
	probe := setup(t, allMembers(), nil)
	first := probe.peers(ref)[0].ID
	members := allMembers()
	for i := range members {
		if members[i].ID == first {
			members[i].Addr = deadAddr
		}
	}
	n0 := setup(t, members, nil)
	if _, _, err := n0.Put(context.Background(), bytes.NewReader(b), 1<<20); err != nil {
		t.Fatalf("Put with %s down = %v", first, err)
	}
	other := "n1"
	if first == "n1" {
		other = "n2"
	}
	if !ctl(t, peerIndex(other), ctlReq{Op: "has", Ref: ref}).Has || n0.counter(t, "peer_failures", "push", "error") != 1 {
		t.Fatalf("copy on %s: no, or peer_failures{push,error} = %v", other, n0.counter(t, "peer_failures", "push", "error"))
	}
}

// TestMissingEverywhere: a blob no member has is ErrNotFound; with a
// member that could not be asked, unavailable instead (it may have it).
func TestMissingEverywhere(t *testing.T) {
	ref := refOf([]byte("never stored"))
	n0 := setup(t, allMembers(), nil)
	_, err := n0.Open(context.Background(), ref)
	if !errors.Is(err, blob.ErrNotFound) || errors.Is(err, blob.ErrUnavailable) {
		t.Fatalf("Open of a blob no member has = %v, want ErrNotFound", err)
	}
	if n0.counter(t, "fetches", "not_found") != 1 {
		t.Fatal("fetches{not_found} not counted")
	}
	n0 = setup(t, append(allMembers(), Member{ID: "n3", Addr: deadAddr}), nil)
	if _, err := n0.Open(context.Background(), ref); !errors.Is(err, blob.ErrUnavailable) {
		t.Fatalf("Open with a member down = %v, want ErrUnavailable", err)
	}
}

// TestCopyPulledInSurvivesCollect: the copy n0 pulled for n1's Put
// (released at once on n0) survives a collection whose cut comes within
// CopyGrace, and goes at one past it, no record naming it.
func TestCopyPulledInSurvivesCollect(t *testing.T) {
	grace := 300 * time.Millisecond
	n0 := setup(t, allMembers(), func(c *Config) { c.CopyGrace = grace })
	ctl(t, 0, ctlReq{Op: "reset", Members: allMembers()[:2]}) // n1's only other member is n0
	b := payload(17, 5000)
	ref := ctl(t, 0, ctlReq{Op: "put", Data: b}).Ref
	if n0.Local().Verify(ref) != nil {
		t.Fatal("n1's Put returned without a copy on n0")
	}
	none := func(blob.Ref) bool { return false }
	if n, err := n0.Collect(n0.Cut(), none); err != nil || n != 0 || n0.Local().Verify(ref) != nil {
		t.Fatalf("Collect within the grace = %d, %v; the copy must stay", n, err)
	}
	time.Sleep(grace + 50*time.Millisecond)
	if n, err := n0.Collect(n0.Cut(), none); err != nil || n != 1 {
		t.Fatalf("Collect past the grace = %d, %v; want the unnamed copy removed", n, err)
	}
}

// TestServeRejectsMalformed: requests that are not ours are refused
// without a panic.
func TestServeRejectsMalformed(t *testing.T) {
	n0 := setup(t, nil, nil)
	var ref blob.Ref
	for _, req := range [][]byte{nil, {'G'}, append([]byte{'G'}, ref[:]...), append([]byte{'X'}, ref[:]...),
		append(append([]byte{'C'}, ref[:]...), 5)} {
		if _, err := n0.Serve(context.Background(), req); !errors.Is(err, errWire) {
			t.Fatalf("Serve(%q) = %v, want errWire", req, err)
		}
	}
}

// TestPulledInForgotten: without collections, the record of pulled-in
// copies forgets those no Collect can need (older than the grace before
// the oldest outstanding Cut), and keeps those a pending Cut needs.
func TestPulledInForgotten(t *testing.T) {
	grace := 50 * time.Millisecond
	n0 := setup(t, nil, func(c *Config) { c.CopyGrace = grace })
	old := refOf([]byte("old"))
	n0.notePulledIn(old)
	c := n0.Cut() // pending: its Collect may still need old
	time.Sleep(2 * grace)
	for i := range 255 {
		n0.notePulledIn(refOf([]byte{byte(i), 1}))
	}
	if _, ok := n0.pulledIn[old]; !ok {
		t.Fatal("forgot a copy a pending Cut's Collect needs")
	}
	if _, err := n0.Collect(c, func(blob.Ref) bool { return false }); err != nil {
		t.Fatal(err)
	}
	n0.notePulledIn(refOf([]byte("fresh")))
	time.Sleep(2 * grace)
	for i := range 256 {
		n0.notePulledIn(refOf([]byte{byte(i), 2}))
	}
	if _, ok := n0.pulledIn[refOf([]byte("fresh"))]; ok || len(n0.pulledIn) > 256 {
		t.Fatalf("%d copies remembered; want those older than the grace forgotten", len(n0.pulledIn))
	}
}

// TestCopyFromNonMemberRefused: a copy request naming an address that is
// not a current member's (here n2, left out of n0's members) is refused:
// nothing is pulled from it or stored; the same request naming a member
// pulls the copy.
func TestCopyFromNonMemberRefused(t *testing.T) {
	n0 := setup(t, []Member{{ID: "n0", Addr: local.Addr()}, {ID: "n1", Addr: peers[0]}}, nil)
	b := payload(7, 3*ChunkSize)
	for i := range peers {
		ctl(t, i, ctlReq{Op: "put_local", Data: b})
	}
	ref := refOf(b)
	_, err := n0.Serve(context.Background(), encodeCopy(ref, int64(len(b)), peers[1]))
	if !errors.Is(err, ErrNotMember) {
		t.Fatalf("copy from a non-member = %v, want ErrNotMember", err)
	}
	if n0.Local().Verify(ref) == nil {
		t.Fatal("the copy from a non-member was stored")
	}
	if out := ctl(t, 1, ctlReq{Op: "counter", Name: "bytes", Labels: []string{"out"}}).Value; out != 0 {
		t.Fatalf("the non-member served %v bytes", out)
	}
	if got := n0.counter(t, "fetches", "refused"); got != 1 {
		t.Fatalf("fetches{refused} = %v, want 1", got)
	}
	if _, err := n0.Serve(context.Background(), encodeCopy(ref, int64(len(b)), peers[0])); err != nil {
		t.Fatalf("copy from a member = %v", err)
	}
	if err := n0.Local().Verify(ref); err != nil {
		t.Fatalf("the copy from a member: %v", err)
	}
}
