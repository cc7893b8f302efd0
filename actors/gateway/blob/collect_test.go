package blob

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
)

// TestCollectRule walks one blob through the steps of the gateway's
// protocol around one snapshot (cut → barrier → capture → Collect) and
// checks the rule: Collect removes it only if the snapshot does not name
// it, nothing holds it, and it was last put, held or released before the
// cut; the next snapshot removes what is no longer protected.
func TestCollectRule(t *testing.T) {
	type step int
	const (
		put     step = iota // Put (holds)
		hold                // Hold
		release             // Release
		cut                 // Cut, then the snapshot's capture
	)
	tests := []struct {
		name  string
		steps []step
		kept  bool // the snapshot's state names the blob
		// survives: after this Collect; survivesNext: after the next one,
		// which does not name the blob either
		survives, survivesNext bool
	}{
		{"named by the snapshot", []step{put, release, cut}, true, true, false},
		{"orphan", []step{put, release, cut}, false, false, false},
		{"put before the cut, record after the barrier", []step{put, cut, release}, false, true, false},
		{"still held at Collect", []step{put, cut}, false, true, true},
		{"put after the cut", []step{cut, put, release}, false, true, false},
		{"held before the cut, released after", []step{put, release, hold, cut, release}, false, true, false},
		{"held and released before the cut", []step{put, release, hold, release, cut}, false, false, false},
		{"put twice, one released after the cut", []step{put, put, release, cut, release}, false, true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fx := newFastFixture(t)
			data := []byte(tt.name)
			ref := Ref{}
			var c Cut
			for _, s := range tt.steps {
				switch s {
				case put:
					ref = fx.putHeld(t, data)
				case hold:
					if err := fx.Hold(ref); err != nil {
						t.Fatalf("Hold() = %v", err)
					}
				case release:
					fx.Release(ref)
				case cut:
					c = fx.Cut()
				}
			}
			keep := func(r Ref) bool { return tt.kept && r == ref }
			checkCollect(t, fx, c, keep, ref, true, tt.survives)
			checkCollect(t, fx, fx.Cut(), func(Ref) bool { return false }, ref, tt.survives, tt.survivesNext)
		})
	}
}

// checkCollect runs Collect(c, keep) and checks that it removed ref if
// present was true and survives false, and that ref is there iff survives.
func checkCollect(t *testing.T, fx *fixture, c Cut, keep func(Ref) bool, ref Ref, present, survives bool) {
	t.Helper()
	wantRemoved := 0
	if present && !survives {
		wantRemoved = 1
	}
	removed, err := fx.Collect(c, keep)
	if err != nil || removed != wantRemoved {
		t.Fatalf("Collect() = %d, %v, want %d", removed, err, wantRemoved)
	}
	err = fx.Verify(ref)
	if survives && err != nil {
		t.Errorf("Verify() after Collect = %v, want the blob kept", err)
	}
	if !survives && !errors.Is(err, ErrNotFound) {
		t.Errorf("Verify() after Collect = %v, want ErrNotFound", err)
	}
}

// TestCollectLeavesOthers: Collect touches neither names that are not
// blobs nor temp files, and updates the gauges and the counter.
func TestCollectLeavesOthers(t *testing.T) {
	fx := newFastFixture(t)
	kept := fx.put(t, []byte("kept"))
	fx.put(t, []byte("orphan"))
	upper := filepath.Join(fx.root(), "AB", "CDEF")
	foreign := []string{
		filepath.Join(fx.root(), "README"),
		filepath.Join(fx.root(), "00", "short"),
		filepath.Join(fx.root(), "ab", fmt.Sprintf("%062x", 0)[:61]+"Z"),
		filepath.Join(fx.dir, tmpDir, "put-in-progress"),
	}
	foreign = append(foreign, upper)
	for _, f := range foreign {
		if err := os.MkdirAll(filepath.Dir(f), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f, []byte("not a blob"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	removed, err := fx.Collect(fx.Cut(), func(r Ref) bool { return r == kept })
	if err != nil || removed != 1 {
		t.Fatalf("Collect() = %d, %v, want 1 (the orphan)", removed, err)
	}
	for _, f := range foreign {
		if _, err := os.Stat(f); err != nil {
			t.Errorf("Collect removed %s: %v", f, err)
		}
	}
	for _, m := range []struct {
		name string
		want float64
	}{
		{"gatehouse_blob_collected_total", 1},
		{"gatehouse_blob_blobs", 1},
		{"gatehouse_blob_stored_bytes", float64(len("kept"))},
	} {
		if got := fx.metric(t, m.name, ""); got != m.want {
			t.Errorf("%s = %v, want %v", m.name, got, m.want)
		}
	}
}

// TestCollectRacesProtocol runs the gateway's protocol from several
// goroutines (Put → append a record → apply → Release; some uploads are
// abandoned: Put → Release) while another takes snapshots (Cut → capture
// what the applied state names → Collect). Contents repeat, so Puts also
// deduplicate against blobs Collect is about to remove. No blob a record
// names may ever be missing, and a blob must be present while held.
func TestCollectRacesProtocol(t *testing.T) {
	fx := newFastFixture(t)
	var (
		mu      sync.Mutex
		applied = map[Ref]bool{} // the state: refs named by appended records
		done    atomic.Bool
		wg      sync.WaitGroup
	)
	for w := range 4 {
		wg.Go(func() {
			for i := range 150 {
				k := uint64((w*7 + i*13) % 40)
				ref, _, err := fx.Put(bytes.NewReader(payload(k, 1+int(k)*100)), 1<<20)
				if err != nil {
					t.Errorf("Put() = %v", err)
					return
				}
				if err := fx.Verify(ref); err != nil { // held: must be there
					t.Errorf("held blob %d: %v", k, err)
				}
				if k%2 == 1 && i%3 != 0 { // even contents are never named; a third of the others abandoned
					mu.Lock() // append + apply
					applied[ref] = true
					mu.Unlock()
				}
				fx.Release(ref)
			}
		})
	}
	var collected int
	snapshots := 0
	collector := func() {
		for !done.Load() {
			c := fx.Cut() // before the barrier
			mu.Lock()     // capture: every record applied so far
			snap := maps.Clone(applied)
			mu.Unlock()
			n, err := fx.Collect(c, func(r Ref) bool { return snap[r] })
			if err != nil {
				t.Errorf("Collect() = %v", err)
				return
			}
			collected += n
			snapshots++
		}
	}
	var cw sync.WaitGroup
	cw.Go(collector)
	wg.Wait()
	done.Store(true)
	cw.Wait()
	mu.Lock()
	defer mu.Unlock()
	for r := range applied {
		if err := fx.Verify(r); err != nil {
			t.Errorf("blob %s named by a record: %v", r, err)
		}
	}
	// A final snapshot leaves exactly the named blobs.
	if _, err := fx.Collect(fx.Cut(), func(r Ref) bool { return applied[r] }); err != nil {
		t.Fatal(err)
	}
	if got := len(files(t, fx.root())); got != len(applied) {
		t.Errorf("%d blobs after a final Collect, want the %d named", got, len(applied))
	}
	t.Logf("%d snapshots collected %d blobs; %d named", snapshots, collected, len(applied))
}

// TestHoldRacesCollect: Hold either finds the blob and protects it, or
// finds it gone; never a hold on a removed blob.
func TestHoldRacesCollect(t *testing.T) {
	fx := newFastFixture(t)
	for round := range 20 {
		refs := make([]Ref, 20)
		for i := range refs {
			refs[i] = fx.put(t, payload(uint64(round*100+i), 64))
		}
		c := fx.Cut()
		var wg sync.WaitGroup
		var held []Ref
		wg.Go(func() {
			for _, r := range slices.Backward(refs) {
				if err := fx.Hold(r); err == nil {
					held = append(held, r)
				} else if !errors.Is(err, ErrNotFound) {
					t.Errorf("Hold() = %v", err)
				}
			}
		})
		if _, err := fx.Collect(c, func(Ref) bool { return false }); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
		for _, r := range held {
			if err := fx.Verify(r); err != nil {
				t.Fatalf("round %d: held blob %s: %v", round, r, err)
			}
		}
	}
}
