package gateway

import (
	"testing"
	"time"

	"gatehouse/actors/actorstest"
)

// startWithRPM starts a node whose gateway has the token buckets at rpm.
func startWithRPM(t *testing.T, rpm int) (*actorstest.Node, *Gateway) {
	t.Helper()
	cfg := DefaultConfig()
	cfg.RateLimitRPM = rpm
	n := newNode(t, cfg, nil)
	return n, start(n)
}

func TestBuckets(t *testing.T) {
	n, gw := startWithRPM(t, 60) // one token a second, burst 5
	allow := func(subject string) bool {
		t.Helper()
		ok, err := gw.Allow(actorstest.Ctx(t), subject)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	for i := range 5 {
		if !allow("user-a") {
			t.Fatalf("request %d within the burst refused", i+1)
		}
	}
	if allow("user-a") {
		t.Error("6th request in the same instant allowed")
	}
	if !allow("10.0.0.7") {
		t.Error("another subject shares user-a's bucket")
	}
	n.Clock.Advance(time.Second)
	if !allow("user-a") || allow("user-a") {
		t.Error("refill is not one token per second at 60 rpm")
	}
	n.Clock.Advance(10 * time.Second)
	for i := range 5 {
		if !allow("user-a") {
			t.Fatalf("after 10 s, request %d refused (burst caps at 5)", i+1)
		}
	}
	if allow("user-a") {
		t.Error("bucket held more than the burst")
	}

	// Sweep: every 5 minutes, buckets idle for more than 10 minutes go.
	if got, err := gw.bk.count(actorstest.Ctx(t)); err != nil || got != 2 {
		t.Fatalf("buckets before the sweep = %d, %v; want 2", got, err)
	}
	n.Clock.Advance(BucketIdleAfter + BucketSweepEvery)
	n.Sys.Tick()
	// count is answered after the shard handled the tick (same mailbox, in order).
	if got, err := gw.bk.count(actorstest.Ctx(t)); err != nil || got != 0 {
		t.Fatalf("buckets after the sweep = %d, %v; want 0", got, err)
	}
	if !allow("user-a") {
		t.Error("a swept subject starts with a full bucket")
	}
}

func TestBucketsDisabled(t *testing.T) {
	_, gw := startWithRPM(t, 0)
	for range 100 {
		if ok, err := gw.Allow(actorstest.Ctx(t), "x"); !ok || err != nil {
			t.Fatalf("Allow with rate_limit_rpm 0 = %v, %v", ok, err)
		}
	}
}
