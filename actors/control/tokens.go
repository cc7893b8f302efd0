package control

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"gatehouse/actors/accounts"
)

// CreateToken issues a token and returns it with its secret, the only
// time the secret leaves the system. A token minted by a token
// (nt.Parent) gets the parent's expiry when it asks for none. Errors:
// ErrInvalidArgument (name, scopes, expiry in the past or after the
// parent's, too many tokens), ErrTokenInvalid or ErrTokenExpired (the
// parent is no longer usable).
func (c *Control) CreateToken(ctx context.Context, nt NewToken) (Token, string, error) {
	if n := utf8.RuneCountInString(nt.Name); n < 1 || n > maxNameLen {
		return Token{}, "", invalid("name must be 1-%d characters", maxNameLen)
	}
	if len(nt.Scopes) == 0 {
		return Token{}, "", invalid(`scopes must name at least one of "read", "write", "admin"`)
	}
	scopes := slices.Clone(nt.Scopes)
	for _, s := range scopes {
		if !s.Valid() {
			return Token{}, "", invalid(`scopes: %q is not one of "read", "write", "admin"`, s)
		}
	}
	slices.Sort(scopes)
	scopes = slices.Compact(scopes)
	now := c.clock.Now()
	if !nt.ExpiresAt.IsZero() && !nt.ExpiresAt.After(now) {
		return Token{}, "", invalid("expiresAt must be in the future")
	}
	secret, err := newTokenSecret()
	if err != nil {
		return Token{}, "", err
	}
	rec := tokenRec{
		ID: uuid.New(), UserID: nt.UserID, Name: nt.Name, Scopes: scopes, Hash: hashOf(secret),
		CreatedAt: now.Unix(), ExpiresAt: unixOrZero(nt.ExpiresAt), Parent: nt.Parent,
	}
	t, err := call(ctx, c, func(a *ctlActor) (Token, error) {
		if err := a.boundByParent(&rec); err != nil {
			return Token{}, err
		}
		n := 0
		for _, t := range a.st.tokens {
			if t.UserID == rec.UserID {
				n++
			}
		}
		if n >= maxTokensUser {
			return Token{}, invalid("a user holds at most %d tokens: revoke one first", maxTokensUser)
		}
		if err := a.commit(saved(kindToken, rec.ID.String(), rec)); err != nil {
			return Token{}, err
		}
		return a.token(&rec), nil
	})
	if err != nil {
		return Token{}, "", fmt.Errorf("create token: %w", err)
	}
	return t, secret, nil
}

// boundByParent checks that rec's parent (if any) is usable, and bounds
// rec's expiry by the parent's.
func (a *ctlActor) boundByParent(rec *tokenRec) error {
	if rec.Parent == uuid.Nil {
		return nil
	}
	p := a.st.tokens[rec.Parent]
	if err := a.st.usable(p, a.c.clock.Now().Unix()); err != nil {
		return err
	}
	switch exp := a.st.expiry(p); {
	case exp == 0:
	case rec.ExpiresAt == 0:
		rec.ExpiresAt = exp
	case rec.ExpiresAt > exp:
		return invalid("expiresAt must not be later than the expiry of the token that creates it (%s)",
			time.Unix(exp, 0).UTC().Format(time.RFC3339))
	}
	return nil
}

// ListTokens returns user's tokens, newest first.
func (c *Control) ListTokens(ctx context.Context, user uuid.UUID) ([]Token, error) {
	return call(ctx, c, func(a *ctlActor) ([]Token, error) {
		out := []Token{}
		for _, t := range a.st.tokens {
			if t.UserID == user {
				out = append(out, a.token(t))
			}
		}
		slices.SortFunc(out, func(x, y Token) int {
			if c := y.CreatedAt.Compare(x.CreatedAt); c != 0 {
				return c
			}
			return bytes.Compare(x.ID[:], y.ID[:])
		})
		return out, nil
	})
}

// RevokeToken deletes token id and every token it minted, and those
// minted in turn (whoever holds them), in one write; owner uuid.Nil
// revokes anyone's (an admin), else only owner's. ErrTokenNotFound
// otherwise. The next request with any of them fails.
func (c *Control) RevokeToken(ctx context.Context, id, owner uuid.UUID) error {
	_, err := call(ctx, c, func(a *ctlActor) (struct{}, error) {
		t, ok := a.st.tokens[id]
		if !ok || (owner != uuid.Nil && t.UserID != owner) {
			return struct{}{}, ErrTokenNotFound
		}
		return struct{}{}, a.revoke([]uuid.UUID{id})
	})
	return err
}

// RevokeUserTokens deletes every token of user and every token those
// minted, in one write (a password reset, a role or licence change,
// logout-all: see actors.CredentialRevoker). None is not an error.
func (c *Control) RevokeUserTokens(ctx context.Context, user uuid.UUID) error {
	_, err := call(ctx, c, func(a *ctlActor) (struct{}, error) {
		var ids []uuid.UUID
		for id, t := range a.st.tokens {
			if t.UserID == user {
				ids = append(ids, id)
			}
		}
		slices.SortFunc(ids, func(x, y uuid.UUID) int { return bytes.Compare(x[:], y[:]) })
		return struct{}{}, a.revoke(ids)
	})
	if err != nil {
		return fmt.Errorf("revoke access tokens of user %s: %w", user, err)
	}
	return nil
}

// revoke deletes the tokens ids and their lineage in one commit.
func (a *ctlActor) revoke(ids []uuid.UUID) error {
	if len(ids) == 0 {
		return nil
	}
	all := append(slices.Clone(ids), a.st.lineage(ids...)...)
	evs := make([]event, len(all))
	for i, id := range all {
		evs[i] = deleted(kindToken, id.String())
	}
	return a.commit(evs...)
}

// CheckToken resolves a presented token for a client at ip and records
// its use. Errors: ErrTokenInvalid (malformed, unknown, revoked, or
// minted by a token that is gone), ErrTokenExpired, a *ThrottledError
// instead of either once ip sent too many bad tokens. The token is looked
// up first: a valid one passes whatever else its address sent, so one
// misconfigured client behind a NAT does not lock out the others. The
// secret is hashed here and never kept.
func (c *Control) CheckToken(ctx context.Context, secret, ip string) (Token, error) {
	h := hashOf(secret)
	formed := WellFormed(secret)
	return call(ctx, c, func(a *ctlActor) (Token, error) {
		now := a.c.clock.Now().Unix()
		id, ok := a.st.byHash[h]
		var t *tokenRec
		if ok && formed {
			t = a.st.tokens[id]
		}
		if err := a.st.usable(t, now); err != nil {
			if w := a.failures[ip].wait(now); w > 0 {
				return Token{}, &ThrottledError{RetryAfter: w}
			}
			a.fail(ip, now)
			return Token{}, err
		}
		a.lastSeen[id] = now
		if now-t.LastUsed >= lastUsedPeriod {
			u := *t
			u.LastUsed = now
			if err := a.commit(saved(kindToken, id.String(), u)); err != nil {
				a.c.lg.Warn("token last use not logged", "token_id", id, "err", err)
			} else {
				t = a.st.tokens[id]
			}
		}
		return a.token(t), nil
	})
}

// token is the API's view of t, with its freshest use.
func (a *ctlActor) token(t *tokenRec) Token {
	last := max(t.LastUsed, a.lastSeen[t.ID])
	return Token{
		ID: t.ID, UserID: t.UserID, Name: t.Name, Scopes: slices.Clone(t.Scopes),
		CreatedAt: time.Unix(t.CreatedAt, 0).UTC(), ExpiresAt: timeOrZero(t.ExpiresAt), LastUsedAt: timeOrZero(last),
		Parent: t.Parent,
	}
}

// failState counts one client's bad tokens.
type failState struct {
	n    int
	last int64
}

func (f *failState) wait(now int64) time.Duration {
	if f == nil || f.n < freeFailures {
		return 0
	}
	d := min(time.Duration(1)<<min(f.n-freeFailures, 30)*time.Second, maxWait)
	return max(time.Duration(f.last-now)*time.Second+d, 0)
}

func (a *ctlActor) fail(ip string, now int64) {
	f := a.failures[ip]
	if f == nil {
		f = &failState{}
		a.failures[ip] = f
	}
	f.n++
	f.last = now
	if f.n == freeFailures {
		a.c.lg.Warn("bad access tokens: client throttled", "ip", ip, "failures", f.n)
	}
}

func (a *ctlActor) sweep(now int64) {
	for ip, f := range a.failures {
		if now-f.last > int64(failureTTL/time.Second) {
			delete(a.failures, ip)
		}
	}
}

var _ accounts.CredentialRevoker = (*Control)(nil)

// RevokeUserCredentials is RevokeUserTokens, for the accounts.
func (c *Control) RevokeUserCredentials(ctx context.Context, user uuid.UUID) error {
	return c.RevokeUserTokens(ctx, user)
}
