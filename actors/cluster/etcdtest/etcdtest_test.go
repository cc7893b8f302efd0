package etcdtest

import (
	"context"
	"testing"
	"time"
)

// TestCloseQuick: a 3-member cluster with a leader closes well within the
// 6 s its leader's graceful hand-over to a stopping peer waits, even with
// a client that has just written (the client is closed first, as
// Client's cleanup does when Start's cleanup closes the cluster).
func TestCloseQuick(t *testing.T) {
	c := StartShared(t, 3)
	cli := c.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := cli.Put(ctx, "k", "v"); err != nil {
		t.Fatalf("put: %v", err)
	}
	if l := c.WaitLeader(ctx); l < 0 {
		t.Fatal("no leader")
	}
	cli.Close()
	start := time.Now()
	c.Close()
	took := time.Since(start)
	t.Logf("close took %v", took)
	if took > 4*time.Second {
		t.Fatalf("close took %v, want under 4s (a graceful stop waits 6s)", took)
	}
}
