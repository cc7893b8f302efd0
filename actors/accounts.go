package actors

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/google/uuid"

	"gatehouse/wal"
)

// accounts owns users and sessions. Management traffic is light next to the
// proxy path, so one actor serializes it; password hashing happens in the
// caller's goroutine, never here.
type accounts struct {
	deps     *keyDeps
	users    map[uuid.UUID]*userRecord
	byEmail  map[string]uuid.UUID
	sessions map[hash]*sessionRecord
}

type userReply struct {
	user  userRecord
	users []userRecord
	err   error
}

// putUser creates a user (create) or replaces one (update via patchUser).
type putUser struct {
	rec   userRecord
	reply chan userReply
}

// patchUser changes some fields of a user; PasswordHash is already hashed.
type patchUser struct {
	id           uuid.UUID
	plan         *Plan
	license      *bool
	role         *Role
	passwordHash string
	reply        chan userReply
}

type getUser struct {
	id    uuid.UUID
	email string // looked up when id is zero
	reply chan userReply
}

type listUsers struct{ reply chan userReply }

type putSession struct {
	rec   sessionRecord
	reply chan error
}

// getSession resolves a live session to its user.
type getSession struct {
	hash  hash
	now   int64
	reply chan userReply
}

type delSession struct {
	hash  hash
	reply chan error
}

type captureAccounts struct{ reply chan accountsImage }

type accountsImage struct{ users, sessions []byte }

func newAccounts(deps *keyDeps, im *image) *accounts {
	a := &accounts{deps: deps, users: im.users, sessions: im.sessions, byEmail: map[string]uuid.UUID{}}
	for id, u := range a.users {
		a.byEmail[u.Email] = id
	}
	return a
}

// Receive is the actor's mailbox entry point: one method per message.
func (a *accounts) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case putUser:
		m.reply <- a.createUser(m.rec)
	case patchUser:
		m.reply <- a.patchUser(m)
	case getUser:
		m.reply <- a.getUser(m)
	case listUsers:
		m.reply <- a.list()
	case putSession:
		m.reply <- a.putSession(m.rec)
	case getSession:
		m.reply <- a.getSession(m)
	case delSession:
		m.reply <- a.delSession(m.hash)
	case captureAccounts:
		m.reply <- a.capture()
	case tick:
		for h, s := range a.sessions {
			if s.ExpiresAt <= m.now {
				delete(a.sessions, h) // expiry is derived from time: nothing to log
			}
		}
	}
}

func (a *accounts) createUser(u userRecord) userReply {
	if _, taken := a.byEmail[u.Email]; taken {
		return userReply{err: ErrEmailTaken}
	}
	if err := a.logUser(u); err != nil {
		return userReply{err: err}
	}
	return userReply{user: u}
}

// logUser makes the full user record durable, then applies it.
func (a *accounts) logUser(u userRecord) error {
	if _, err := a.deps.log.Append(jsonRecord(recUserPut, u)); err != nil {
		return fmt.Errorf("log user: %w", err)
	}
	if old, ok := a.users[u.ID]; ok && old.Email != u.Email {
		delete(a.byEmail, old.Email)
	}
	a.users[u.ID] = &u
	a.byEmail[u.Email] = u.ID
	return nil
}

func (a *accounts) patchUser(m patchUser) userReply {
	cur, ok := a.users[m.id]
	if !ok {
		return userReply{err: ErrUserNotFound}
	}
	u := *cur
	if m.plan != nil {
		u.Plan = *m.plan
	}
	if m.license != nil {
		u.LicenseActive = *m.license
	}
	if m.role != nil {
		u.Role = *m.role
	}
	if m.passwordHash != "" {
		u.PasswordHash = m.passwordHash
	}
	if err := a.logUser(u); err != nil {
		return userReply{err: err}
	}
	return userReply{user: u}
}

func (a *accounts) getUser(m getUser) userReply {
	id := m.id
	if id == uuid.Nil {
		var ok bool
		if id, ok = a.byEmail[normalizeEmail(m.email)]; !ok {
			return userReply{err: ErrUserNotFound}
		}
	}
	u, ok := a.users[id]
	if !ok {
		return userReply{err: ErrUserNotFound}
	}
	return userReply{user: *u}
}

func (a *accounts) list() userReply {
	out := make([]userRecord, 0, len(a.users))
	for _, u := range a.users {
		out = append(out, *u)
	}
	slices.SortFunc(out, func(x, y userRecord) int {
		if x.CreatedAt != y.CreatedAt {
			return int(x.CreatedAt - y.CreatedAt)
		}
		return strings.Compare(x.Email, y.Email)
	})
	return userReply{users: out}
}

func (a *accounts) putSession(s sessionRecord) error {
	if _, ok := a.users[s.UserID]; !ok {
		return ErrUserNotFound
	}
	if _, err := a.deps.log.Append(jsonRecord(recSessionPut, s)); err != nil {
		return fmt.Errorf("log session: %w", err)
	}
	a.sessions[s.Hash] = &s
	return nil
}

func (a *accounts) getSession(m getSession) userReply {
	s, ok := a.sessions[m.hash]
	if !ok || s.ExpiresAt <= m.now {
		return userReply{err: ErrSessionInvalid}
	}
	u, ok := a.users[s.UserID]
	if !ok {
		return userReply{err: ErrSessionInvalid}
	}
	return userReply{user: *u}
}

func (a *accounts) delSession(h hash) error {
	if _, ok := a.sessions[h]; !ok {
		return nil
	}
	if _, err := a.deps.log.Append(wal.Record{Type: recSessionDel, Data: append([]byte(nil), h[:]...)}); err != nil {
		return fmt.Errorf("log logout: %w", err)
	}
	delete(a.sessions, h)
	return nil
}

func (a *accounts) capture() accountsImage {
	us := make([]userRecord, 0, len(a.users))
	for _, u := range a.users {
		us = append(us, *u)
	}
	ss := make([]sessionRecord, 0, len(a.sessions))
	for _, s := range a.sessions {
		ss = append(ss, *s)
	}
	ub, err1 := json.Marshal(us)
	sb, err2 := json.Marshal(ss)
	if err1 != nil || err2 != nil {
		panic("actors: marshal accounts image") // plain structs: cannot fail
	}
	return accountsImage{users: ub, sessions: sb}
}

func normalizeEmail(e string) string { return strings.ToLower(strings.TrimSpace(e)) }
