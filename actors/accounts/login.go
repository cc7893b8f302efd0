package accounts

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"time"

	"gatehouse/actors"
)

// Login hardening. Password hashing (argon2id, 19 MiB a run) is bounded
// to about one run per core: a login that cannot get a slot within
// hashWait is ErrBusy, so a burst of logins cannot exhaust the memory.
// Failed logins are throttled per account and per client IP: after
// freeFailures failures in a row, each further attempt must wait 2^(n-free)
// seconds since the last failure, at most maxAccountWait for an account
// (an attacker cannot lock a real user out for long) and maxIPWait for an
// IP. A success resets both. The counters live in the accounts actor and
// are not durable (a restart forgets them); idle ones are swept.
const (
	freeFailures   = 5
	maxAccountWait = time.Minute
	maxIPWait      = 15 * time.Minute
	hashWait       = 250 * time.Millisecond
	failureTTL     = time.Hour
)

// ErrBusy: every password-hashing slot is taken; retry in a second.
var ErrBusy = errors.New("accounts: busy, retry shortly")

// ErrLoginThrottled: too many failed logins; see ThrottledError.
var ErrLoginThrottled = errors.New("accounts: too many failed logins")

// ThrottledError says how long to wait before the next login attempt.
type ThrottledError struct{ RetryAfter time.Duration }

func (e *ThrottledError) Error() string {
	return fmt.Sprintf("%v: retry in %s", ErrLoginThrottled, e.RetryAfter)
}

func (e *ThrottledError) Unwrap() error { return ErrLoginThrottled }

// failState counts the consecutive failures of one account or IP.
type failState struct {
	n    int
	last int64 // Unix seconds of the last failure
}

// wait is how long an attempt at now must still wait.
func (f *failState) wait(now int64, limit time.Duration) time.Duration {
	if f == nil || f.n < freeFailures {
		return 0
	}
	d := min(time.Duration(1)<<min(f.n-freeFailures, 30)*time.Second, limit)
	return max(time.Duration(f.last-now)*time.Second+d, 0)
}

type loginBegin struct {
	email, ip string
	now       int64
	reply     chan loginBeginReply
}

type loginBeginReply struct {
	user  userRecord
	found bool
	wait  time.Duration
}

type loginEnd struct {
	email, ip string
	ok        bool
	now       int64
}

func (a *accountsActor) loginBegin(m loginBegin) loginBeginReply {
	r := loginBeginReply{wait: max(a.failures["email:"+m.email].wait(m.now, maxAccountWait),
		a.failures["ip:"+m.ip].wait(m.now, maxIPWait))}
	if id, ok := a.byEmail[m.email]; ok {
		r.user, r.found = *a.users[id], true
	}
	return r
}

func (a *accountsActor) loginEnd(m loginEnd) {
	for _, k := range []string{"email:" + m.email, "ip:" + m.ip} {
		if m.ok {
			delete(a.failures, k)
			continue
		}
		f := a.failures[k]
		if f == nil {
			f = &failState{}
			a.failures[k] = f
		}
		f.n++
		f.last = m.now
	}
}

// sweepFailures forgets counters idle for failureTTL.
func (a *accountsActor) sweepFailures(now int64) {
	for k, f := range a.failures {
		if now-f.last > int64(failureTTL/time.Second) {
			delete(a.failures, k)
		}
	}
}

// hashSlot takes a password-hashing slot; release it when done.
func (s *Service) hashSlot(ctx context.Context) (release func(), err error) {
	t := time.NewTimer(hashWait)
	defer t.Stop()
	select {
	case s.hashing <- struct{}{}:
		return func() { <-s.hashing }, nil
	case <-t.C:
		return nil, ErrBusy
	case <-ctx.Done():
		return nil, fmt.Errorf("%w: %w", actors.ErrUnavailable, ctx.Err())
	}
}

func hashSlots() int { return max(runtime.GOMAXPROCS(0), 1) }

// hashWithSlot hashes pw in a password-hashing slot.
func (s *Service) hashWithSlot(ctx context.Context, pw string) (string, error) {
	release, err := s.hashSlot(ctx)
	if err != nil {
		return "", err
	}
	defer release()
	return hashPassword(pw)
}
