package ratelimit

import (
	"math"
	"testing"
	"time"
)

func TestBucket(t *testing.T) {
	base := time.Unix(1_764_000_000, 0)
	at := func(d time.Duration) time.Time { return base.Add(d) }
	type step struct {
		at          time.Duration
		rate, burst float64
		want        bool
		tokens      float64 // after the step
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"zero value is full and drains", []step{
			{0, 1, 3, true, 2}, {0, 1, 3, true, 1}, {0, 1, 3, true, 0}, {0, 1, 3, false, 0},
		}},
		{"refills at rate", []step{
			{0, 2, 1, true, 0}, {250 * time.Millisecond, 2, 1, false, 0.5}, {500 * time.Millisecond, 2, 1, true, 0},
		}},
		{"refill is capped at burst", []step{
			{0, 10, 2, true, 1}, {time.Hour, 10, 2, true, 1},
		}},
		{"time going backwards adds nothing", []step{
			{time.Second, 1, 1, true, 0}, {0, 1, 1, false, 0}, {-time.Hour, 1, 1, false, 0},
			{time.Second + 500*time.Millisecond, 1, 1, false, 0.5}, {2 * time.Second, 1, 1, true, 0},
		}},
		{"zero rate never refills", []step{
			{0, 0, 1, true, 0}, {time.Hour, 0, 1, false, 0},
		}},
		{"burst below one admits nothing", []step{
			{0, 5, 0.5, false, 0.5}, {0, 5, 0, false, 0}, {0, 5, -1, false, 0}, {0, 5, math.NaN(), false, 0},
		}},
		{"lowering burst takes tokens away", []step{
			{0, 1, 10, true, 9}, {0, 1, 4, true, 2},
		}},
		{"infinite rate refills at once", []step{
			{0, math.Inf(1), 2, true, 1}, {0, math.Inf(1), 2, true, 0}, {time.Nanosecond, math.Inf(1), 2, true, 1},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b Bucket
			for i, s := range tt.steps {
				if got := b.Allow(at(s.at), s.rate, s.burst); got != s.want {
					t.Fatalf("step %d: Allow(%v, %v, %v) = %v, want %v", i, s.at, s.rate, s.burst, got, s.want)
				}
				if got := b.Tokens(at(s.at), s.rate, s.burst); math.Abs(got-s.tokens) > 1e-9 {
					t.Fatalf("step %d: Tokens(%v, %v, %v) = %v, want %v", i, s.at, s.rate, s.burst, got, s.tokens)
				}
			}
		})
	}
}

func TestBucketTokensDoesNotChangeBucket(t *testing.T) {
	var b Bucket
	now := time.Unix(1_764_000_000, 0)
	b.Allow(now, 1, 5)
	before := b
	b.Tokens(now.Add(time.Hour), 1, 5)
	if b != before {
		t.Errorf("Tokens changed the bucket from %+v to %+v", before, b)
	}
}
