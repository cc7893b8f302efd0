package accounts

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/google/uuid"

	"gatehouse/actors"
	"gatehouse/actors/clock"
	"gatehouse/wal"
)

// accountsState is the accounts domain's durable state: users, the email
// index derived from them, and sessions. apply is its only writer besides
// expire (sessions end by time, which needs no record).
type accountsState struct {
	users    map[uuid.UUID]*userRecord
	byEmail  map[string]uuid.UUID
	sessions map[hash]*sessionRecord
}

func newAccountsState() *accountsState {
	return &accountsState{users: map[uuid.UUID]*userRecord{}, byEmail: map[string]uuid.UUID{}, sessions: map[hash]*sessionRecord{}}
}

// apply is the accounts domain's one state transition, used by the
// accounts actor after its append and by restore (snapshot entries and WAL
// replay) alike. Every event is a full-state upsert or a delete, so
// applying one twice is harmless.
func (a *accountsState) apply(_ uint64, ev accountEvent) {
	switch e := ev.(type) {
	case userSaved:
		u := e.u
		if old, ok := a.users[u.ID]; ok && old.Email != u.Email && a.byEmail[old.Email] == u.ID {
			delete(a.byEmail, old.Email)
		}
		a.users[u.ID] = &u
		a.byEmail[u.Email] = u.ID
	case sessionOpened:
		ss := e.s
		a.sessions[ss.Hash] = &ss
	case sessionClosed:
		delete(a.sessions, e.hash)
	}
}

// expire drops sessions that ended at or before now. Expiry follows from
// the time alone, so it is not logged: a restore drops the same sessions
// (and snapshots never carry them).
func (a *accountsState) expire(now int64) {
	for h, ss := range a.sessions {
		if ss.ExpiresAt <= now {
			delete(a.sessions, h)
		}
	}
}

// accountsActor owns users and sessions; every change goes through it.
type accountsActor struct {
	log   actors.EventLog
	clock clock.Clock
	*accountsState
	failures map[string]*failState // failed logins per "email:" and "ip:" (see login.go)
}

// tick expires sessions and sweeps login failures (Service.Tick).
type tick struct{ now int64 }

// foreignAccount applies one account event another node logged.
type foreignAccount struct {
	seq  uint64
	ev   accountEvent
	done chan struct{}
}

type userReply struct {
	user  userRecord
	users []userRecord
	err   error
	// ended: the change ended the user's sessions (a new password, role
	// or licence), so other credentials end too (revokeCredentials).
	ended bool
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
	keyLimit     *int64
	keyCap       *int64         // UserPatch.KeyRateLimitCap
	plans        map[Plan]int64 // Config.Plans, read only, for keyCap
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

type captureAccounts struct{ reply chan []byte }

// Receive is the actor's mailbox entry point: one method per message.
func (a *accountsActor) Receive(ctx actor.Context) {
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
		a.expire(m.now)
		a.sweepFailures(m.now)
	case loginBegin:
		m.reply <- a.loginBegin(m)
	case loginEnd:
		a.loginEnd(m)
	case logoutAll:
		m.reply <- a.logoutAll(m)
	case foreignAccount:
		a.accountsState.apply(m.seq, m.ev)
		close(m.done)
	}
}

func (a *accountsActor) createUser(u userRecord) userReply {
	if _, taken := a.byEmail[u.Email]; taken {
		return userReply{err: ErrEmailTaken}
	}
	if err := a.logUser(u); err != nil {
		return userReply{err: err}
	}
	return userReply{user: u}
}

// logUser makes the full user record durable, then applies it.
func (a *accountsActor) logUser(u userRecord) error {
	return a.commit(userSaved{u: u})
}

// commit appends ev (durable on return), then applies it: the only way
// the actor changes its state.
func (a *accountsActor) commit(evs ...accountEvent) error {
	recs := make([]wal.Record, len(evs))
	for i, ev := range evs {
		recs[i] = ev.record()
	}
	last, err := a.log.Append(recs...)
	if err != nil {
		return fmt.Errorf("log accounts event: %w", err)
	}
	for i, ev := range evs {
		a.apply(last-uint64(len(evs)-1-i), ev)
	}
	return nil
}

func (a *accountsActor) patchUser(m patchUser) userReply {
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
	if m.keyLimit != nil {
		u.KeyRateLimit = *m.keyLimit
	}
	if m.keyCap != nil && *m.keyCap < newKeyLimit(m.plans, u.Plan, u.KeyRateLimit) {
		u.KeyRateLimit = *m.keyCap
	}
	evs := []accountEvent{userSaved{u: u}}
	// A new password, role or license ends every session of the user, in
	// the same write: a stolen session must not outlive a password reset.
	ended := u.PasswordHash != cur.PasswordHash || u.Role != cur.Role || u.LicenseActive != cur.LicenseActive
	if ended {
		evs = append(evs, a.sessionsOf(u.ID)...)
	}
	if err := a.commit(evs...); err != nil {
		return userReply{err: err}
	}
	return userReply{user: u, ended: ended}
}

// sessionsOf returns the events that close every session of user, in a
// fixed order.
func (a *accountsActor) sessionsOf(user uuid.UUID) []accountEvent {
	var hs []hash
	for h, ss := range a.sessions {
		if ss.UserID == user {
			hs = append(hs, h)
		}
	}
	slices.SortFunc(hs, func(x, y hash) int { return bytes.Compare(x[:], y[:]) })
	evs := make([]accountEvent, len(hs))
	for i, h := range hs {
		evs[i] = sessionClosed{hash: h}
	}
	return evs
}

type logoutAll struct {
	user  uuid.UUID
	reply chan userReply
}

func (a *accountsActor) logoutAll(m logoutAll) userReply {
	evs := a.sessionsOf(m.user)
	if len(evs) == 0 {
		return userReply{}
	}
	return userReply{err: a.commit(evs...)}
}

func (a *accountsActor) getUser(m getUser) userReply {
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

func (a *accountsActor) list() userReply {
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

func (a *accountsActor) putSession(s sessionRecord) error {
	if _, ok := a.users[s.UserID]; !ok {
		return ErrUserNotFound
	}
	return a.commit(sessionOpened{s: s})
}

func (a *accountsActor) getSession(m getSession) userReply {
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

func (a *accountsActor) delSession(h hash) error {
	if _, ok := a.sessions[h]; !ok {
		return nil
	}
	return a.commit(sessionClosed{hash: h})
}

func (a *accountsActor) capture() []byte {
	return a.section(a.clock.Now().Unix())
}

// encode is the snapshot form of the state at now: users by id, live
// sessions by hash (ended ones are left out), so equal states encode to
// equal bytes.
func (a *accountsState) encode(now int64) (users, sessions []byte) {
	us := make([]userRecord, 0, len(a.users))
	for _, u := range a.users {
		c := *u
		c.V = accountsVersion
		us = append(us, c)
	}
	slices.SortFunc(us, func(x, y userRecord) int { return bytes.Compare(x.ID[:], y.ID[:]) })
	ss := make([]sessionRecord, 0, len(a.sessions))
	for _, s := range a.sessions {
		if s.ExpiresAt > now {
			c := *s
			c.V = accountsVersion
			ss = append(ss, c)
		}
	}
	slices.SortFunc(ss, func(x, y sessionRecord) int { return bytes.Compare(x.Hash[:], y.Hash[:]) })
	ub, err1 := json.Marshal(us)
	sb, err2 := json.Marshal(ss)
	if err1 != nil || err2 != nil {
		panic("accounts: marshal the snapshot section") // plain structs: cannot fail
	}
	return ub, sb
}

func normalizeEmail(e string) string { return strings.ToLower(strings.TrimSpace(e)) }
