// Package clock is the one source of time for gatehouse's actors.
//
// Every component that reads the time takes a Clock, so tests set time
// exactly with Fake instead of sleeping:
//
//	clk := clock.NewFake(time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC))
//	reg := actors.NewKeyRegistry(..., clk)
//	clk.Advance(25 * time.Hour) // the rotation grace period is over
//
// Real is safe for concurrent use; Fake is too (it guards its instant with a
// mutex, which is fine: it holds no key state).
package clock

import (
	"sync"
	"time"
)

// Clock tells the current time.
type Clock interface {
	// Now returns the current instant. Safe for concurrent use.
	Now() time.Time
}

// Real is the wall clock.
type Real struct{}

// Now returns time.Now().
func (Real) Now() time.Time { return time.Now() }

// Fake is a Clock that only moves when told to.
type Fake struct {
	mu  sync.Mutex
	now time.Time
}

// NewFake returns a Fake set to t.
func NewFake(t time.Time) *Fake { return &Fake{now: t} }

// Now returns the fake instant.
func (f *Fake) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

// Advance moves the fake instant forward by d (backwards if d < 0).
func (f *Fake) Advance(d time.Duration) {
	f.mu.Lock()
	f.now = f.now.Add(d)
	f.mu.Unlock()
}

// Set moves the fake instant to t.
func (f *Fake) Set(t time.Time) {
	f.mu.Lock()
	f.now = t
	f.mu.Unlock()
}
