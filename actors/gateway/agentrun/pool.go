package agentrun

import (
	"context"
	"math/rand/v2"
	"net/http"
	"sync"
	"time"

	"github.com/google/uuid"

	"gatehouse/actors/gateway"
	"gatehouse/actors/gateway/agentrun/llm"
)

// Provider key pools. Every provider the runtime calls gets a pool: one
// slot per credential (api_key, then api_keys; one keyless slot when it
// has none), each with the client built for that key and its health. A
// call takes the ready slots in turn; a key that got 429 cools down for
// the wait the provider asked for (or the backoff), a key refused with
// 401/403 is set aside until the provider is updated. The pools are the
// runtime's own cache of opened credentials and call health, never
// logged or persisted: a restart starts every key ready. A provider's
// pool is rebuilt when its record changes (UpdatedAt).

// keySlot is one credential of a provider's pool.
type keySlot struct {
	hint      string
	client    llm.Client
	coolUntil time.Time // ready again at; zero: ready
	rejected  bool      // 401/403 until the provider is updated
	lastErr   string
}

// provPool is one provider's pool. Its fields are guarded by mu.
type provPool struct {
	mu        sync.Mutex
	p         gateway.Provider
	slots     []*keySlot
	next      int // round robin over the slots
	lastErr   string
	lastErrAt time.Time
	keys      []string // the opened credentials, for the redactor
	retries   int      // settings.max_retries, read when the pool is built
}

// pools holds every provider's pool, by provider id.
type pools struct {
	mu        sync.Mutex
	m         map[uuid.UUID]*provPool
	http      *http.Client
	maxAnswer int
	open      func(gateway.Provider) ([]string, error)
	now       func() time.Time
}

func newPools(hc *http.Client, maxAnswer int, open func(gateway.Provider) ([]string, error)) *pools {
	return &pools{m: map[uuid.UUID]*provPool{}, http: hc, maxAnswer: maxAnswer, open: open, now: time.Now}
}

// get returns p's pool, building it (opening its keys, making one client
// per key) when p is new or changed since.
func (ps *pools) get(p gateway.Provider) (*provPool, error) {
	ps.mu.Lock()
	pp, ok := ps.m[p.ID]
	ps.mu.Unlock()
	if ok {
		pp.mu.Lock()
		same := pp.p.UpdatedAt.Equal(p.UpdatedAt)
		pp.mu.Unlock()
		if same {
			return pp, nil
		}
	}
	keys, err := ps.open(p)
	if err != nil {
		return nil, err
	}
	if len(keys) == 0 {
		keys = []string{""}
	}
	np := &provPool{p: p, keys: keys, retries: maxRetriesOf(p.Settings)}
	for _, k := range keys {
		c, err := llm.New(llm.Config{Type: p.ProviderType, APIBase: p.APIBase, Key: k, Settings: p.Settings, MaxAnswer: ps.maxAnswer, HTTP: ps.http})
		if err != nil {
			return nil, providerError(err.Error())
		}
		np.slots = append(np.slots, &keySlot{hint: gateway.KeyHint(k), client: c})
	}
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if cur, ok := ps.m[p.ID]; ok {
		cur.mu.Lock()
		newer := !p.UpdatedAt.After(cur.p.UpdatedAt)
		cur.mu.Unlock()
		if newer { // someone built it from the same or a newer record meanwhile
			return cur, nil
		}
	}
	ps.m[p.ID] = np
	return np, nil
}

// each calls f on every pool (a deleted provider's pool lingers until
// the runtime closes: a few hundred bytes).
func (ps *pools) each(f func(*provPool)) {
	ps.mu.Lock()
	all := make([]*provPool, 0, len(ps.m))
	for _, pp := range ps.m {
		all = append(all, pp)
	}
	ps.mu.Unlock()
	for _, pp := range all {
		f(pp)
	}
}

// pick returns the next ready slot, or nil and when the first cooling
// slot is ready again (zero when every slot is rejected).
func (pp *provPool) pick(now time.Time) (*keySlot, time.Time) {
	pp.mu.Lock()
	defer pp.mu.Unlock()
	var soonest time.Time
	for i := range pp.slots {
		s := pp.slots[(pp.next+i)%len(pp.slots)]
		switch {
		case s.rejected:
		case !s.coolUntil.After(now):
			pp.next = (pp.next + i + 1) % len(pp.slots)
			return s, time.Time{}
		case soonest.IsZero() || s.coolUntil.Before(soonest):
			soonest = s.coolUntil
		}
	}
	return nil, soonest
}

// failed records e against slot s: a rejected key is set aside, a rate
// limited one cools down for wait.
func (pp *provPool) failed(s *keySlot, e *llm.Error, wait time.Duration, now time.Time) {
	pp.mu.Lock()
	defer pp.mu.Unlock()
	msg := e.Error()
	s.lastErr, pp.lastErr, pp.lastErrAt = msg, msg, now
	switch {
	case e.KeyRejected():
		s.rejected = true
	case e.RateLimited():
		s.coolUntil = now.Add(wait)
	}
}

// noted records a failure that is not the key's (unreachable, 5xx).
func (pp *provPool) noted(e error, now time.Time) {
	pp.mu.Lock()
	defer pp.mu.Unlock()
	pp.lastErr, pp.lastErrAt = e.Error(), now
}

// cooling counts the slots cooling down or rejected at now.
func (pp *provPool) cooling(now time.Time) (cool, rejected int) {
	pp.mu.Lock()
	defer pp.mu.Unlock()
	for _, s := range pp.slots {
		switch {
		case s.rejected:
			rejected++
		case s.coolUntil.After(now):
			cool++
		}
	}
	return cool, rejected
}

// health is the pool's ProviderHealth at now.
func (pp *provPool) health(now time.Time) ProviderHealth {
	pp.mu.Lock()
	defer pp.mu.Unlock()
	h := ProviderHealth{Keys: make([]KeyHealth, 0, len(pp.slots)), LastError: pp.lastErr}
	if !pp.lastErrAt.IsZero() {
		t := pp.lastErrAt.UTC()
		h.LastErrorAt = &t
	}
	for _, s := range pp.slots {
		if s.hint == "" {
			continue // the keyless slot
		}
		kh := KeyHealth{Key: s.hint, State: KeyReady, LastError: s.lastErr}
		switch {
		case s.rejected:
			kh.State = KeyRejected
		case s.coolUntil.After(now):
			kh.State = KeyCoolingDown
			t := s.coolUntil.UTC()
			kh.RetryAt = &t
		}
		h.Keys = append(h.Keys, kh)
	}
	return h
}

// Backoff between retries of one provider: full jitter over an
// exponential step (250 ms doubling, capped at 8 s), never less than the
// wait the provider asked for.
const (
	backoffBase = 250 * time.Millisecond
	backoffCap  = 8 * time.Second
	// maxRetryWait is the longest the runtime waits before a retry; a
	// provider asking for more is skipped (its key cools down) and the
	// call goes to the next fallback, or fails.
	maxRetryWait = 20 * time.Second
	// defaultCooldown is how long a key rate limited without a
	// Retry-After cools down.
	defaultCooldown = 5 * time.Second
)

// backoff is the wait before retry n (1-based).
func backoff(n int) time.Duration {
	d := backoffBase << min(n-1, 10)
	d = min(d, backoffCap)
	return d/2 + rand.N(d/2+1)
}

// sleep waits d or until ctx is done.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
