package actors

import (
	"testing"
	"time"
)

func TestGatewayBuckets(t *testing.T) {
	e := newEnv(t)
	e.cfg.GatewayRPM = 60 // one token a second, burst 5
	s := e.start()
	allow := func(subject string) bool {
		t.Helper()
		ok, err := s.Allow(ctx(t), subject)
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
	e.clk.Advance(time.Second)
	if !allow("user-a") || allow("user-a") {
		t.Error("refill is not one token per second at 60 rpm")
	}
	e.clk.Advance(10 * time.Second)
	for i := range 5 {
		if !allow("user-a") {
			t.Fatalf("after 10 s, request %d refused (burst caps at 5)", i+1)
		}
	}
	if allow("user-a") {
		t.Error("bucket held more than the burst")
	}

	// Sweep: every 5 minutes, buckets idle for more than 10 minutes go.
	e.clk.Advance(BucketIdleAfter + BucketSweepEvery)
	s.Tick()
	waitFor(t, func() bool { n, _ := s.liveBucketCount(ctx(t)); return n == 0 })
	if !allow("user-a") {
		t.Error("a swept subject starts with a full bucket")
	}
}

func TestGatewayBucketsDisabled(t *testing.T) {
	e := newEnv(t)
	s := e.start()
	for range 100 {
		if ok, err := s.Allow(ctx(t), "x"); !ok || err != nil {
			t.Fatalf("Allow with rate_limit_rpm 0 = %v, %v", ok, err)
		}
	}
}
