package control

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
)

// CreateToken issues a token and returns it with its secret, the only
// time the secret leaves the system. Errors: ErrInvalidArgument (name,
// scopes, expiry in the past, too many tokens).
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
		CreatedAt: now.Unix(), ExpiresAt: unixOrZero(nt.ExpiresAt),
	}
	t, err := call(ctx, c, func(a *ctlActor) (Token, error) {
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

// RevokeToken deletes token id; owner uuid.Nil revokes anyone's (an
// admin), else only owner's. ErrTokenNotFound otherwise. The next request
// with it fails.
func (c *Control) RevokeToken(ctx context.Context, id, owner uuid.UUID) error {
	_, err := call(ctx, c, func(a *ctlActor) (struct{}, error) {
		t, ok := a.st.tokens[id]
		if !ok || (owner != uuid.Nil && t.UserID != owner) {
			return struct{}{}, ErrTokenNotFound
		}
		delete(a.lastSeen, id)
		return struct{}{}, a.commit(deleted(kindToken, id.String()))
	})
	return err
}

// CheckToken resolves a presented token for a client at ip and records
// its use. Errors: ErrTokenInvalid (malformed, unknown, revoked),
// ErrTokenExpired, a *ThrottledError once ip sent too many bad tokens.
// The secret is hashed here and never kept.
func (c *Control) CheckToken(ctx context.Context, secret, ip string) (Token, error) {
	h := hashOf(secret)
	formed := WellFormed(secret)
	return call(ctx, c, func(a *ctlActor) (Token, error) {
		now := a.c.clock.Now().Unix()
		f := a.failures[ip]
		if w := f.wait(now); w > 0 {
			return Token{}, &ThrottledError{RetryAfter: w}
		}
		id, ok := a.st.byHash[h]
		var t *tokenRec
		if ok && formed {
			t = a.st.tokens[id]
		}
		switch {
		case t == nil:
			a.fail(ip, now)
			return Token{}, ErrTokenInvalid
		case t.ExpiresAt != 0 && t.ExpiresAt <= now:
			a.fail(ip, now)
			return Token{}, ErrTokenExpired
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
