package cluster

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestLocksExclude: callers holding one name never overlap, whether they
// share a node (one lease, hence one etcd mutex key) or not, and a holder
// waits until it has applied what the previous holder on another node
// wrote.
func TestLocksExclude(t *testing.T) {
	etcd := sharedEtcd(t)
	prefix := "/" + t.Name()
	var applied, written [2]atomic.Uint64
	locks := make([]*Locks, 2)
	for i := range locks {
		locks[i] = NewLocks(etcd.Client(t), prefix, []string{"a", "b"}[i], 5*time.Second, applied[i].Load, written[i].Load)
		t.Cleanup(locks[i].Close)
	}
	var inside, maxInside atomic.Int32
	var wg sync.WaitGroup
	for g := range 6 { // three callers on each node
		wg.Go(func() {
			l := locks[g%2]
			for range 5 {
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				unlock, err := l.Lock(ctx, "entity/1")
				cancel()
				if err != nil {
					t.Error(err)
					return
				}
				n := inside.Add(1)
				for m := maxInside.Load(); n > m && !maxInside.CompareAndSwap(m, n); m = maxInside.Load() {
				}
				time.Sleep(2 * time.Millisecond)
				inside.Add(-1)
				unlock()
			}
		})
	}
	wg.Wait()
	if m := maxInside.Load(); m != 1 {
		t.Fatalf("%d callers held one lock at once", m)
	}

	// Node a writes up to 100 and releases; b may only go on once it has
	// applied that far.
	written[0].Store(100)
	unlock, err := locks[0].Lock(context.Background(), "entity/2")
	if err != nil {
		t.Fatal(err)
	}
	unlock()
	got := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		unlock, err := locks[1].Lock(ctx, "entity/2")
		if err == nil {
			unlock()
		}
		got <- err
	}()
	select {
	case err := <-got:
		t.Fatalf("b took the lock before applying a's writes (err %v)", err)
	case <-time.After(200 * time.Millisecond):
	}
	applied[1].Store(100)
	if err := <-got; err != nil {
		t.Fatal(err)
	}

	// A caller that gives up waiting leaves the name free for the next.
	unlock, err = locks[0].Lock(context.Background(), "entity/3")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	if _, err := locks[0].Lock(ctx, "entity/3"); err == nil {
		t.Fatal("a second caller on one node took a held lock")
	}
	cancel()
	unlock()
	unlock, err = locks[0].Lock(context.Background(), "entity/3")
	if err != nil {
		t.Fatal(err)
	}
	unlock()
	locks[0].mu.Lock()
	left := len(locks[0].local)
	locks[0].mu.Unlock()
	if left != 0 {
		t.Fatalf("%d local lock entries left behind", left)
	}
}
