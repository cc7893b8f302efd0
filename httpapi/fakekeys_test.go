package httpapi

import (
	"context"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"gatehouse/actors"
)

// Keys of fakeSystem.

func (f *fakeSystem) planLimit(p actors.Plan) int64 {
	if p == actors.PlanPremium {
		return 10000
	}
	return 1000
}

func (f *fakeSystem) newSecret(id uuid.UUID) string {
	s := actors.KeyPrefix + "_" + randomAlnum(32)
	f.secrets[s] = fakeSecret{key: id}
	return s
}

func (f *fakeSystem) CreateKey(_ context.Context, nk actors.NewKey) (actors.KeyInfo, string, error) {
	if err := f.lock(); err != nil {
		return actors.KeyInfo{}, "", err
	}
	defer f.mu.Unlock()
	owner, ok := f.users[nk.Owner.ID]
	if !ok || !owner.LicenseActive {
		return actors.KeyInfo{}, "", actors.ErrLicenseRequired
	}
	if n := utf8.RuneCountInString(nk.Name); n < 1 || n > 100 {
		return actors.KeyInfo{}, "", invalid("name", "must be 1-100 characters")
	}
	now := f.clk.Now()
	id := uuid.New()
	secret := f.newSecret(id)
	k := &fakeKey{daily: map[int64]int64{}}
	k.info = actors.KeyInfo{
		ID: id, Owner: owner.ID, Name: nk.Name, Prefix: actors.KeyPrefix,
		Preview:   secret[:13] + "…" + secret[len(secret)-4:],
		RateLimit: f.planLimit(owner.Plan), IsActive: true, ExpiresAt: nk.ExpiresAt, CreatedAt: now,
	}
	f.keys[id] = k
	return k.info, secret, nil
}

func (f *fakeSystem) ListKeys(_ context.Context, owner uuid.UUID) ([]actors.KeyInfo, error) {
	if err := f.lock(); err != nil {
		return nil, err
	}
	defer f.mu.Unlock()
	var out []actors.KeyInfo
	for _, k := range f.keys {
		if k.info.Owner == owner {
			out = append(out, k.info)
		}
	}
	return out, nil
}

func (f *fakeSystem) GetKey(_ context.Context, id uuid.UUID) (actors.KeyInfo, error) {
	if err := f.lock(); err != nil {
		return actors.KeyInfo{}, err
	}
	defer f.mu.Unlock()
	k, ok := f.keys[id]
	if !ok {
		return actors.KeyInfo{}, actors.ErrKeyNotFound
	}
	return k.info, nil
}

func (f *fakeSystem) RotateKey(_ context.Context, id uuid.UUID) (actors.KeyInfo, string, error) {
	if err := f.lock(); err != nil {
		return actors.KeyInfo{}, "", err
	}
	defer f.mu.Unlock()
	k, ok := f.keys[id]
	switch {
	case !ok:
		return actors.KeyInfo{}, "", actors.ErrKeyNotFound
	case !k.info.IsActive:
		return actors.KeyInfo{}, "", actors.ErrKeyInactive
	}
	now := f.clk.Now()
	for s, e := range f.secrets {
		if e.key == id && e.validTil.IsZero() {
			f.secrets[s] = fakeSecret{key: id, validTil: now.Add(f.grace)}
		}
	}
	secret := f.newSecret(id)
	k.info.RotatedAt, k.info.GraceEndsAt = now, now.Add(f.grace)
	k.info.Preview = secret[:13] + "…" + secret[len(secret)-4:]
	return k.info, secret, nil
}

func (f *fakeSystem) RevokeKey(_ context.Context, id uuid.UUID) error {
	if err := f.lock(); err != nil {
		return err
	}
	defer f.mu.Unlock()
	k, ok := f.keys[id]
	if !ok {
		return actors.ErrKeyNotFound
	}
	k.info.IsActive = false
	return nil
}

func (f *fakeSystem) DeleteKey(_ context.Context, id uuid.UUID) error {
	if err := f.lock(); err != nil {
		return err
	}
	defer f.mu.Unlock()
	if _, ok := f.keys[id]; !ok {
		return actors.ErrKeyNotFound
	}
	delete(f.keys, id)
	for s, e := range f.secrets {
		if e.key == id {
			delete(f.secrets, s)
		}
	}
	return nil
}

func (f *fakeSystem) UpdateKey(_ context.Context, id uuid.UUID, p actors.KeyPatch) (actors.KeyInfo, error) {
	if err := f.lock(); err != nil {
		return actors.KeyInfo{}, err
	}
	defer f.mu.Unlock()
	k, ok := f.keys[id]
	if !ok {
		return actors.KeyInfo{}, actors.ErrKeyNotFound
	}
	if p.RateLimit != nil {
		k.info.RateLimit = *p.RateLimit
	}
	if p.Name != nil {
		k.info.Name = *p.Name
	}
	if p.ExpiresAt != nil {
		k.info.ExpiresAt = *p.ExpiresAt
	}
	return k.info, nil
}

func (f *fakeSystem) KeyUsage(_ context.Context, id uuid.UUID, days int) (actors.Usage, error) {
	if err := f.lock(); err != nil {
		return actors.Usage{}, err
	}
	defer f.mu.Unlock()
	k, ok := f.keys[id]
	if !ok {
		return actors.Usage{}, actors.ErrKeyNotFound
	}
	if days < 1 || days > 30 {
		return actors.Usage{}, invalid("days", "must be in 1..30")
	}
	now := f.clk.Now()
	today := now.Unix() / 86400
	u := actors.Usage{Total: k.info.UsageCount, LastUsedAt: k.info.LastUsedAt}
	for d := today - int64(days) + 1; d <= today; d++ {
		u.Daily = append(u.Daily, actors.DayCount{Date: time.Unix(d*86400, 0).UTC().Format(time.DateOnly), Count: k.daily[d]})
	}
	dec := k.window.Peek(now.Unix(), k.info.RateLimit)
	u.Limit, u.Used, u.Remaining = dec.Limit, dec.Used, dec.Remaining
	return u, nil
}

// check resolves a secret to its key; it does not allocate.
func (f *fakeSystem) check(secret []byte) (*fakeKey, error) {
	if len(secret) == 0 {
		return nil, actors.ErrKeyMissing
	}
	e, ok := f.secrets[string(secret)]
	if !ok {
		return nil, actors.ErrKeyInvalid
	}
	k := f.keys[e.key]
	now := f.clk.Now()
	switch {
	case !k.info.IsActive:
		return nil, actors.ErrKeyRevoked
	case !k.info.ExpiresAt.IsZero() && !now.Before(k.info.ExpiresAt):
		return nil, actors.ErrKeyExpired
	case !e.validTil.IsZero() && !now.Before(e.validTil):
		return nil, actors.ErrKeyExpired
	}
	return k, nil
}

func (f *fakeSystem) Authorize(_ context.Context, secret []byte) actors.AuthResult {
	if err := f.lock(); err != nil {
		return actors.AuthResult{Err: err}
	}
	defer f.mu.Unlock()
	k, err := f.check(secret)
	if err != nil {
		return actors.AuthResult{Err: err}
	}
	now := f.clk.Now()
	res := actors.AuthResult{KeyID: k.info.ID, UserID: k.info.Owner, IsActive: true}
	res.Limit = k.window.Allow(now.Unix(), k.info.RateLimit)
	if !res.Limit.Allowed {
		res.Err = actors.ErrRateLimited
		return res
	}
	k.info.UsageCount++
	k.info.LastUsedAt = now
	k.daily[now.Unix()/86400]++
	return res
}

func (f *fakeSystem) Validate(_ context.Context, secret []byte) actors.AuthResult {
	if err := f.lock(); err != nil {
		return actors.AuthResult{Err: err}
	}
	defer f.mu.Unlock()
	k, err := f.check(secret)
	if err != nil {
		return actors.AuthResult{Err: err}
	}
	res := actors.AuthResult{KeyID: k.info.ID, UserID: k.info.Owner, IsActive: true}
	res.Limit = k.window.Peek(f.clk.Now().Unix(), k.info.RateLimit)
	return res
}
