package keys

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/google/uuid"

	"gatehouse/actors"
	"gatehouse/wal"
)

// Authorize checks a presented secret and, if it is usable, counts one
// request against the key's sliding-window limit and its usage. It is the
// proxy's hot path: the secret is hashed here and not retained, the message
// is pooled, the reply comes back on a channel, and nothing is allocated.
// The wait ends at ctx's end or, at the latest, after one to two
// Config.AuthTimeout periods (a shared watchdog, not a timer per call), so
// callers on the hot path may pass a context without a deadline.
func (s *Service) Authorize(ctx context.Context, secret []byte) AuthResult {
	return s.authorize(ctx, secret, true)
}

// Validate is Authorize without consuming: it never counts a request.
func (s *Service) Validate(ctx context.Context, secret []byte) AuthResult {
	return s.authorize(ctx, secret, false)
}

func (s *Service) authorize(ctx context.Context, secret []byte, consume bool) AuthResult {
	if len(secret) == 0 {
		return AuthResult{Err: ErrKeyMissing}
	}
	if !wellFormed(secret) {
		return AuthResult{Err: ErrKeyInvalid}
	}
	m := s.authPool.Get()
	m.hash, m.consume, m.routed = hashOf(secret), consume, false
	i := shardOfHash(m.hash, len(s.shards))
	if !s.shardMBs[i].deliver(m, s.shardObjs[i]) {
		s.root.Send(s.shards[i], m)
	}
	r, ok, err := actors.Await(ctx, m.reply, s.dog.C())
	if !ok {
		return AuthResult{Err: fmt.Errorf("authorize: %w", err)}
	}
	s.authPool.Put(m)
	if r.fwd != 0 {
		return s.forwardCounted(ctx, r)
	}
	return r
}

// validateName applies the seed's rule: a string of 1 to 100 characters
// (Unicode code points), not only white space.
func validateName(name string) error {
	if !utf8.ValidString(name) {
		return fmt.Errorf("name must be valid UTF-8: %w", actors.ErrInvalidArgument)
	}
	if n := utf8.RuneCountInString(name); n < 1 || n > 100 {
		return fmt.Errorf("name must be 1-100 characters, got %d: %w", n, actors.ErrInvalidArgument)
	}
	if strings.TrimSpace(name) == "" {
		return fmt.Errorf("name must not be blank: %w", actors.ErrInvalidArgument)
	}
	return nil
}

// CreateKey creates a key for k.Owner with the owner's plan limit and
// returns it with its full secret, which is never available again.
func (s *Service) CreateKey(ctx context.Context, k NewKey) (KeyInfo, string, error) {
	if err := validateName(k.Name); err != nil {
		return KeyInfo{}, "", err
	}
	now := s.clock.Now()
	if !k.ExpiresAt.IsZero() && !k.ExpiresAt.After(now) {
		return KeyInfo{}, "", fmt.Errorf("expiresAt must be in the future: %w", actors.ErrInvalidArgument)
	}
	if !k.Owner.Licensed {
		return KeyInfo{}, "", ErrLicenseRequired
	}
	if k.Owner.RateLimit < 1 || k.Owner.RateLimit > maxRateLimit {
		return KeyInfo{}, "", fmt.Errorf("owner's rate limit %d not in 1..%d: %w", k.Owner.RateLimit, maxRateLimit, actors.ErrInvalidArgument)
	}
	release, err := s.reserveKeySlot(ctx, k.Owner, k.Owner.MaxKeys)
	if err != nil {
		return KeyInfo{}, "", err
	}
	created := false
	defer func() { release(created) }()
	limit := k.Owner.RateLimit
	secret, h, err := newSecretHash()
	if err != nil {
		return KeyInfo{}, "", err
	}
	home := shardOfHash(h, len(s.shards))
	id, err := idOnShard(home, len(s.shards))
	if err != nil {
		return KeyInfo{}, "", err
	}
	sealed, err := sealKey(s.sealer, secret, id[:])
	if err != nil {
		return KeyInfo{}, "", err
	}
	rec := keyRecord{
		id: id, owner: k.Owner.ID, name: k.Name, preview: previewOf(secret), hash: h, sealed: sealed,
		rateLimit: limit, createdAt: now.Unix(),
	}
	if !k.ExpiresAt.IsZero() {
		rec.expiresAt = k.ExpiresAt.Unix()
	}
	ev := keyCreated{rec: rec}
	reply := make(chan keyReply, 1)
	owner := s.shards[shardOfID(id, len(s.shards))]
	s.elog.AppendAsync([]wal.Record{ev.record()}, func(seq uint64, err error) {
		if err != nil {
			reply <- keyReply{err: fmt.Errorf("log key: %w", err)}
			return
		}
		s.courier.post(owner, createKey{ev: ev, seq: seq, reply: reply})
	})
	r, err := await(ctx, reply)
	if err == nil {
		err = r.err
	}
	if err != nil {
		return KeyInfo{}, "", fmt.Errorf("create key: %w", err)
	}
	created = true                               // logged and applied: the slot is the key's now
	if err := s.publish(ctx, r.fx); err != nil { // the secret must resolve before the caller holds it
		return KeyInfo{}, "", fmt.Errorf("create key: %w", err)
	}
	return r.info, secret, nil
}

func newSecretHash() (string, hash, error) {
	secret, err := newSecret()
	if err != nil {
		return "", hash{}, err
	}
	return secret, hashOf([]byte(secret)), nil
}

// idOnShard draws random UUIDs until one maps to shard home, so a key's id
// and its first secret live on the same shard and authorization takes one
// hop fewer. After many misses (only with absurd shard counts) any id will do.
func idOnShard(home, n int) (uuid.UUID, error) {
	var id uuid.UUID
	var err error
	for range 64 * n {
		if id, err = uuid.NewRandom(); err != nil {
			return id, fmt.Errorf("new key id: %w", err)
		}
		if shardOfID(id, n) == home {
			break
		}
	}
	return id, nil
}

// reserveKeySlot takes one of owner's key slots (max: KeyOwner.MaxKeys)
// and returns what gives it back unless the key was created. On one node
// s.slots keeps the count, from the shards the first time since start. In a cluster other nodes create and delete the owner's keys too:
// the owner's creations are serialized across the nodes under one lock,
// held until the key is created, and each counts the keys afresh.
func (s *Service) reserveKeySlot(ctx context.Context, owner KeyOwner, maxKeys int) (release func(created bool), err error) {
	if s.locking() {
		return s.reserveKeySlotCluster(ctx, owner, maxKeys)
	}
	counted := -1
	for {
		switch s.slots.reserve(owner.ID, maxKeys, counted) {
		case reserveTaken:
			return func(created bool) {
				if !created {
					s.slots.add(owner.ID, -1)
				}
			}, nil
		case reserveRefused:
			return nil, fmt.Errorf("%d keys on the %s plan: %w", maxKeys, owner.Plan, ErrKeyLimit)
		}
		keys, err := s.ListKeys(ctx, owner.ID)
		if err != nil {
			return nil, fmt.Errorf("create key: %w", err)
		}
		counted = len(keys)
	}
}

func (s *Service) reserveKeySlotCluster(ctx context.Context, owner KeyOwner, maxKeys int) (func(bool), error) {
	unlock, err := s.lock(ctx, "keys-of/"+owner.ID.String())
	if err != nil {
		return nil, fmt.Errorf("create key: %w", err)
	}
	keys, err := s.ListKeys(ctx, owner.ID)
	if err != nil {
		unlock()
		return nil, fmt.Errorf("create key: %w", err)
	}
	if len(keys) >= maxKeys {
		unlock()
		return nil, fmt.Errorf("%d keys on the %s plan: %w", maxKeys, owner.Plan, ErrKeyLimit)
	}
	return func(bool) { unlock() }, nil
}

// publish delivers directory effects to the directory shards that own
// their hashes and waits until every one has applied them.
func (s *Service) publish(ctx context.Context, fx dirEffects) error {
	if fx.empty() {
		return nil
	}
	n := len(s.shards)
	byShard := map[int]dirEffects{}
	for _, h := range fx.add {
		e := byShard[shardOfHash(h, n)]
		e.id, e.add = fx.id, append(e.add, h)
		byShard[shardOfHash(h, n)] = e
	}
	for _, h := range fx.drop {
		e := byShard[shardOfHash(h, n)]
		e.id, e.drop = fx.id, append(e.drop, h)
		byShard[shardOfHash(h, n)] = e
	}
	dones := make([]chan struct{}, 0, len(byShard))
	for i, e := range byShard {
		done := make(chan struct{})
		s.root.Send(s.shards[i], dirApply{fx: e, done: done})
		dones = append(dones, done)
	}
	for _, done := range dones {
		if _, err := await(ctx, done); err != nil {
			return fmt.Errorf("directory: %w", err)
		}
	}
	return nil
}

// keyCommand sends a command to the key's owner and waits for the answer.
func (s *Service) keyCommand(ctx context.Context, c *keyCmd) (keyReply, error) {
	if c.op.mutates() {
		unlock, err := s.lockKey(ctx, c.id)
		if err != nil {
			return keyReply{}, err
		}
		defer unlock()
	}
	c.reply = make(chan keyReply, 1)
	s.root.Send(s.shards[shardOfID(c.id, len(s.shards))], c)
	r, err := await(ctx, c.reply)
	if err != nil {
		return r, err
	}
	return r, r.err
}

// GetKey returns one key. ErrKeyNotFound if there is none.
func (s *Service) GetKey(ctx context.Context, id uuid.UUID) (KeyInfo, error) {
	r, err := s.keyCommand(ctx, &keyCmd{id: id, op: opGet})
	return r.info, err
}

// ListKeys returns the keys of owner, newest first.
func (s *Service) ListKeys(ctx context.Context, owner uuid.UUID) ([]KeyInfo, error) {
	replies := make(chan listReply, len(s.shards))
	for _, pid := range s.shards {
		s.root.Send(pid, listKeys{owner: owner, reply: replies})
	}
	var out []KeyInfo
	for range s.shards {
		r, err := await(ctx, replies)
		if err != nil {
			return nil, fmt.Errorf("list keys: %w", err)
		}
		out = append(out, r.infos...)
		for range r.more {
			kr, err := await(ctx, r.live)
			if err != nil {
				return nil, fmt.Errorf("list keys: %w", err)
			}
			if kr.err == nil && kr.info.Owner == owner {
				out = append(out, kr.info)
			}
		}
	}
	slices.SortFunc(out, func(a, b KeyInfo) int {
		if c := b.CreatedAt.Compare(a.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(a.ID.String(), b.ID.String())
	})
	return out, nil
}

// RotateKey issues a new secret for the key; the previous one stays valid
// for the grace period. Usage and the limiter window are shared by both.
// ErrKeyInactive for a revoked key.
func (s *Service) RotateKey(ctx context.Context, id uuid.UUID) (KeyInfo, string, error) {
	secret, h, err := newSecretHash()
	if err != nil {
		return KeyInfo{}, "", err
	}
	sealed, err := sealKey(s.sealer, secret, id[:])
	if err != nil {
		return KeyInfo{}, "", err
	}
	r, err := s.keyCommand(ctx, &keyCmd{id: id, op: opRotate, rot: keyRotated{preview: previewOf(secret), hash: h, sealed: sealed}})
	if err != nil {
		return KeyInfo{}, "", err
	}
	// The new secret must resolve before the caller can hold it.
	if err := s.publish(ctx, r.fx); err != nil {
		return KeyInfo{}, "", fmt.Errorf("rotate key: %w", err)
	}
	return r.info, secret, nil
}

// RevokeKey makes every secret of the key invalid from the next request on.
func (s *Service) RevokeKey(ctx context.Context, id uuid.UUID) error {
	_, err := s.keyCommand(ctx, &keyCmd{id: id, op: opRevoke})
	return err
}

// DeleteKey removes the key; its secrets then answer ErrKeyInvalid.
func (s *Service) DeleteKey(ctx context.Context, id uuid.UUID) error {
	r, err := s.keyCommand(ctx, &keyCmd{id: id, op: opDelete})
	if err != nil {
		return err
	}
	s.slots.add(r.info.Owner, -1)
	return s.publish(ctx, r.fx)
}

// UpdateKey changes the rate limit, name or expiry of a key.
func (s *Service) UpdateKey(ctx context.Context, id uuid.UUID, p KeyPatch) (KeyInfo, error) {
	if p.Name != nil {
		if err := validateName(*p.Name); err != nil {
			return KeyInfo{}, err
		}
	}
	if p.RateLimit != nil && (*p.RateLimit < 1 || *p.RateLimit > maxRateLimit) {
		return KeyInfo{}, fmt.Errorf("rateLimit must be an integer in 1..%d: %w", maxRateLimit, actors.ErrInvalidArgument)
	}
	r, err := s.keyCommand(ctx, &keyCmd{id: id, op: opUpdate, patch: p})
	return r.info, err
}

// KeyUsage returns the last days UTC days of usage (1..30) and the live
// window figures.
func (s *Service) KeyUsage(ctx context.Context, id uuid.UUID, days int) (Usage, error) {
	if days < 1 || days > 30 {
		return Usage{}, fmt.Errorf("days must be an integer in 1..30: %w", actors.ErrInvalidArgument)
	}
	r, err := s.keyCommand(ctx, &keyCmd{id: id, op: opUsage, days: days})
	return r.usage, err
}
