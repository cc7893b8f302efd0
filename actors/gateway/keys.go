package gateway

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/google/uuid"

	"gatehouse/actors"
	"gatehouse/actors/clock"
)

// KeyPrefix starts every gateway API key; 32 lowercase hex characters follow.
const KeyPrefix = "gateway_"

const keyLen = len(KeyPrefix) + 32

// WellFormed reports whether b has the shape of a gateway API key.
func WellFormed(b []byte) bool {
	if len(b) != keyLen || string(b[:len(KeyPrefix)]) != KeyPrefix {
		return false
	}
	for _, c := range b[len(KeyPrefix):] {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

func shardOf(h [32]byte, n int) int {
	return int(uint32(h[0])<<24|uint32(h[1])<<16|uint32(h[2])<<8|uint32(h[3])) % n
}

// keyShard owns the API keys whose hash maps to it.
type keyShard struct {
	log    actors.EventLog
	clock  clock.Clock
	byHash map[[32]byte]*APIKey
	byID   map[uuid.UUID]*APIKey
}

// authMsg is the pooled hot-path lookup.
type authMsg struct {
	hash  [32]byte
	reply chan authReply
}

type authReply struct {
	auth KeyAuth
	err  error
}

type putKey struct {
	key   APIKey
	reply chan error
}

type revokeKey struct {
	id    uuid.UUID
	reply chan error
}

type listKeys struct{ reply chan []APIKey }

type captureKeys struct{ reply chan []APIKey }

// Receive is the shard's mailbox entry point.
func (s *keyShard) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *authMsg:
		m.reply <- s.authenticate(m.hash)
	case putKey:
		m.reply <- s.create(m.key)
	case revokeKey:
		m.reply <- s.revoke(m.id)
	case listKeys:
		m.reply <- s.list()
	case captureKeys:
		m.reply <- s.list()
	}
}

func (s *keyShard) put(k *APIKey) {
	s.byHash[k.Hash] = k
	s.byID[k.ID] = k
}

func (s *keyShard) authenticate(h [32]byte) authReply {
	k := s.byHash[h]
	if k == nil || !k.Active(s.clock.Now()) {
		return authReply{err: ErrKeyInvalid}
	}
	return authReply{auth: KeyAuth{ID: k.ID, Scopes: k.Scopes}}
}

func (s *keyShard) create(k APIKey) error {
	if _, err := s.log.Append(jsonRecord(recAPIKeyPut, k)); err != nil {
		return fmt.Errorf("log api key: %w", err)
	}
	s.put(&k)
	return nil
}

// revoke answers ErrNotFound when the key is not on this shard.
func (s *keyShard) revoke(id uuid.UUID) error {
	cur := s.byID[id]
	if cur == nil {
		return ErrNotFound
	}
	if !cur.RevokedAt.IsZero() {
		return nil
	}
	k := *cur
	k.RevokedAt = s.clock.Now().UTC()
	if _, err := s.log.Append(jsonRecord(recAPIKeyPut, k)); err != nil {
		return fmt.Errorf("log api key revoke: %w", err)
	}
	s.put(&k)
	return nil
}

func (s *keyShard) list() []APIKey {
	out := make([]APIKey, 0, len(s.byID))
	for _, k := range s.byID {
		out = append(out, *k)
	}
	return out
}

// Authenticate resolves a presented API key: ErrKeyMissing when empty,
// ErrKeyInvalid when malformed, unknown, revoked or expired. It is the hot
// path: the message is pooled and the wait is bounded by ctx or, at the
// latest, the System's watchdog (no timer per call). b is not retained.
func (g *Gateway) Authenticate(ctx context.Context, b []byte) (KeyAuth, error) {
	if len(b) == 0 {
		return KeyAuth{}, ErrKeyMissing
	}
	if !WellFormed(b) {
		return KeyAuth{}, ErrKeyInvalid
	}
	m := g.authPool.Get()
	m.hash = sha256.Sum256(b)
	r, ok, err := actors.Ask(ctx, g.root, g.shards[shardOf(m.hash, len(g.shards))], m, m.reply, g.wd())
	if !ok {
		return KeyAuth{}, fmt.Errorf("authenticate: %w", err)
	}
	g.authPool.Put(m)
	return r.auth, r.err
}

// CreateAPIKey creates a key and returns it with the raw key, which is
// never available again. Errors wrap ErrInvalid.
func (g *Gateway) CreateAPIKey(ctx context.Context, n NewAPIKey) (APIKey, string, error) {
	if err := validName("name", n.Name, 100); err != nil {
		return APIKey{}, "", err
	}
	if len(n.Scopes) == 0 {
		return APIKey{}, "", fmt.Errorf("scopes must name at least one scope: %w", ErrInvalid)
	}
	scopes := make([]Scope, 0, len(n.Scopes))
	for _, sc := range n.Scopes {
		if !ValidScope(sc) {
			return APIKey{}, "", fmt.Errorf("scopes: unknown scope %q: %w", sc, ErrInvalid)
		}
		if !slices.Contains(scopes, sc) {
			scopes = append(scopes, sc)
		}
	}
	if n.ExpiresIn < 0 {
		return APIKey{}, "", fmt.Errorf("expires_in must be > 0: %w", ErrInvalid)
	}
	var rnd [16]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return APIKey{}, "", fmt.Errorf("draw api key: %w", err)
	}
	raw := KeyPrefix + hex.EncodeToString(rnd[:])
	now := g.clock.Now().UTC().Truncate(time.Second)
	k := APIKey{
		ID: uuid.New(), Name: n.Name, Preview: raw[:len(KeyPrefix)+4] + "…" + raw[len(raw)-4:],
		Hash: sha256.Sum256([]byte(raw)), Scopes: scopes, CreatedAt: now,
	}
	if n.ExpiresIn > 0 {
		k.ExpiresAt = now.Add(n.ExpiresIn)
	}
	reply := make(chan error, 1)
	g.root.Send(g.shards[shardOf(k.Hash, len(g.shards))], putKey{key: k, reply: reply})
	err, werr := await(ctx, reply)
	if err = cmpErr(err, werr); err != nil {
		return APIKey{}, "", fmt.Errorf("create api key: %w", err)
	}
	return k, raw, nil
}

func cmpErr(err, werr error) error {
	if werr != nil {
		return werr
	}
	return err
}

// ListAPIKeys returns every key, newest first (revoked ones included).
func (g *Gateway) ListAPIKeys(ctx context.Context) ([]APIKey, error) {
	replies := make(chan []APIKey, len(g.shards))
	for _, pid := range g.shards {
		g.root.Send(pid, listKeys{reply: replies})
	}
	var out []APIKey
	for range g.shards {
		ks, err := await(ctx, replies)
		if err != nil {
			return nil, fmt.Errorf("list api keys: %w", err)
		}
		out = append(out, ks...)
	}
	slices.SortFunc(out, func(a, b APIKey) int {
		if c := b.CreatedAt.Compare(a.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(a.ID.String(), b.ID.String())
	})
	return out, nil
}

// RevokeAPIKey makes the key fail from the next request on; ErrNotFound
// if there is no such key. Revoking twice is not an error.
func (g *Gateway) RevokeAPIKey(ctx context.Context, id uuid.UUID) error {
	replies := make(chan error, len(g.shards))
	for _, pid := range g.shards {
		g.root.Send(pid, revokeKey{id: id, reply: replies})
	}
	found := false
	var first error
	for range g.shards {
		err, werr := await(ctx, replies)
		if werr != nil {
			return werr
		}
		switch {
		case err == nil:
			found = true
		case !errors.Is(err, ErrNotFound):
			first = err
		}
	}
	if first != nil {
		return first
	}
	if !found {
		return ErrNotFound
	}
	return nil
}

// validName checks a required display string of 1..max code points.
func validName(field, v string, maxRunes int) error {
	if !utf8.ValidString(v) || strings.TrimSpace(v) == "" || utf8.RuneCountInString(v) > maxRunes {
		return fmt.Errorf("%s must be 1-%d characters, not blank: %w", field, maxRunes, ErrInvalid)
	}
	return nil
}
