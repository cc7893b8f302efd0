package gateway

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
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

// keyShard owns the API keys whose hash maps to it (its keyPart).
type keyShard struct {
	idx   int
	n     int // shards
	log   actors.EventLog
	clock clock.Clock
	part  *keyPart
	by    *Actor // who sent the message being handled (nil: internal)
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

type createKey struct {
	key   *apiKeyRec
	reply chan error
}

type revokeKey struct {
	id    uuid.UUID
	reply chan error
}

type listKeys struct{ reply chan []entity }

// Receive is the shard's mailbox entry point.
func (s *keyShard) Receive(ctx actor.Context) { s.handle(ctx.Message()) }

func (s *keyShard) handle(msg any) {
	switch m := msg.(type) {
	case withActor:
		m.as(&s.by, s.handle)
	case queryActivity:
		m.reply <- queryActivityLog(&s.part.activity, m.f)
	case *authMsg:
		m.reply <- s.authenticate(m.hash)
	case createKey:
		m.reply <- s.create(m.key)
	case revokeKey:
		m.reply <- s.revoke(m.id)
	case listKeys:
		m.reply <- s.part.keys(nil)
	case captureMsg:
		m.reply <- s.part.entities(nil)
	case liveApply:
		applyForeign(s.part, m.seq, m.ev)
		m.done <- struct{}{}
	}
}

func (s *keyShard) authenticate(h [32]byte) authReply {
	k := s.part.byHash[h]
	if k == nil || !k.active(s.clock.Now()) {
		return authReply{err: ErrKeyInvalid}
	}
	return authReply{auth: KeyAuth{ID: k.ID, Scopes: k.Scopes, UserID: k.UserID}}
}

// create stores a key the Gateway drew: its id maps to this shard, as its
// hash does, so revocation finds it by id alone.
func (s *keyShard) create(k *apiKeyRec) error {
	if shardOf(k.Hash, s.n) != s.idx || shardOfID(k.ID, s.n) != s.idx {
		return fmt.Errorf("api key %s was drawn for another shard", k.ID) // a bug, not input
	}
	if s.part.byID[k.ID] != nil || s.part.byHash[k.Hash] != nil {
		return fmt.Errorf("api key %s: %w", k.ID, ErrExists)
	}
	au := audit{action: "api_key.create", entityType: string(kindAPIKey), entityID: k.ID.String(),
		summary: fmt.Sprintf("created API key %q (%s) with scopes %v", k.Name, k.Preview, k.Scopes)}
	if err := commitAs(s.log, s.part, s.by, s.clock.Now(), au, entitySaved{k}); err != nil {
		return fmt.Errorf("log api key: %w", err)
	}
	return nil
}

// revoke answers ErrNotFound when the key is not on this shard.
func (s *keyShard) revoke(id uuid.UUID) error {
	cur := s.part.byID[id]
	if cur == nil {
		return ErrNotFound
	}
	if !cur.RevokedAt.IsZero() {
		return nil
	}
	k := *cur
	k.RevokedAt = s.clock.Now().UTC()
	au := audit{action: "api_key.revoke", entityType: string(kindAPIKey), entityID: k.ID.String(),
		summary: fmt.Sprintf("revoked API key %q (%s)", k.Name, k.Preview)}
	if err := commitAs(s.log, s.part, s.by, s.clock.Now(), au, entitySaved{&k}); err != nil {
		return fmt.Errorf("log api key revoke: %w", err)
	}
	return nil
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
	switch {
	case n.UserID == "" && !slices.Contains(scopes, ScopeAdmin):
		return APIKey{}, "", fmt.Errorf("user_id is required: a read or write key acts for one user: %w", ErrInvalid)
	case IsChannelUser(n.UserID):
		return APIKey{}, "", fmt.Errorf("user_id: %q names a channel sender, not a gateway user: %w", n.UserID, ErrInvalid)
	case n.UserID != "" && !ValidUserID(n.UserID):
		return APIKey{}, "", fmt.Errorf("user_id must be 1-255 printable characters: %w", ErrInvalid)
	}
	k, raw, err := g.drawKey()
	if err != nil {
		return APIKey{}, "", err
	}
	k.Name, k.Scopes, k.UserID, k.CreatedAt = n.Name, scopes, n.UserID, g.clock.Now().UTC().Truncate(time.Second)
	if n.ExpiresIn > 0 {
		k.ExpiresAt = k.CreatedAt.Add(n.ExpiresIn)
	}
	reply := make(chan error, 1)
	g.send(ctx, g.shards[shardOf(k.Hash, len(g.shards))], createKey{key: k, reply: reply})
	err, werr := await(ctx, reply)
	if err = cmpErr(err, werr); err != nil {
		return APIKey{}, "", fmt.Errorf("create api key: %w", err)
	}
	return k.view(), raw, nil
}

// drawKey draws a raw key and an id on the shard of its hash, so the key
// is found by id (revocation) and by hash (authentication) on one shard.
func (g *Gateway) drawKey() (*apiKeyRec, string, error) {
	var rnd [16]byte
	if _, err := io.ReadFull(g.rand, rnd[:]); err != nil {
		return nil, "", fmt.Errorf("draw api key: %w", err)
	}
	raw := KeyPrefix + hex.EncodeToString(rnd[:])
	k := &apiKeyRec{Preview: raw[:len(KeyPrefix)+4] + "…" + raw[len(raw)-4:], Hash: sha256.Sum256([]byte(raw))}
	home := shardOf(k.Hash, len(g.shards))
	// One draw in len(g.shards) matches: 64 per shard fail with odds e^-64.
	for range 64 * len(g.shards) {
		if id := g.newID(kindAPIKey); shardOfID(id, len(g.shards)) == home {
			k.ID = id
			return k, raw, nil
		}
	}
	return nil, "", errors.New("draw api key: no id for its shard")
}

func cmpErr(err, werr error) error {
	if werr != nil {
		return werr
	}
	return err
}

// ListAPIKeys returns every key, newest first (revoked ones included).
func (g *Gateway) ListAPIKeys(ctx context.Context) ([]APIKey, error) {
	replies := make(chan []entity, len(g.shards))
	for _, pid := range g.shards {
		g.root.Send(pid, listKeys{reply: replies})
	}
	var out []APIKey
	for range g.shards {
		ks, err := await(ctx, replies)
		if err != nil {
			return nil, fmt.Errorf("list api keys: %w", err)
		}
		for _, k := range ks {
			out = append(out, k.(*apiKeyRec).view())
		}
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
// if there is no such key. Revoking twice is not an error. Only the shard
// holding the key hears of it.
func (g *Gateway) RevokeAPIKey(ctx context.Context, id uuid.UUID) error {
	reply := make(chan error, 1)
	g.send(ctx, g.shards[g.homes.Load().of(id)], revokeKey{id: id, reply: reply})
	err, werr := await(ctx, reply)
	return cmpErr(err, werr)
}

// validName checks a required display string of 1..max code points.
func validName(field, v string, maxRunes int) error {
	if !utf8.ValidString(v) || strings.TrimSpace(v) == "" || utf8.RuneCountInString(v) > maxRunes {
		return fmt.Errorf("%s must be 1-%d characters, not blank: %w", field, maxRunes, ErrInvalid)
	}
	return nil
}

// ValidUserID reports whether u can name a gateway user: 1 to 255 bytes of
// valid UTF-8 without control characters (what X-Gateway-User-Id accepts).
func ValidUserID(u string) bool {
	if u == "" || len(u) > 255 || !utf8.ValidString(u) {
		return false
	}
	for _, c := range u {
		if c < 0x20 || c == 0x7f {
			return false
		}
	}
	return true
}
