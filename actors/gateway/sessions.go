package gateway

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
)

// Sessions: durable conversations (key, agent, user, channel, label,
// messages, token counts). The tenant shard of the session's key owns it
// (tenants.go) and serializes its turns: a turn is begun (the session is busy, its history
// handed out), run outside the actor (the provider call), then ended (the
// user's message and the answer appended in one record, durable before
// the caller is answered). A turn begun while another runs waits its
// turn, so two sends on one session run one after the other; abort
// cancels the running one. History is bounded: beyond MaxSessionMessages
// or MaxSessionBytes the oldest messages are dropped.

// Session limits.
const (
	MaxSessionMessages = 200
	MaxSessionBytes    = 256 << 10
	maxSessionKey      = 128
)

// SessionMessage is one message of a session's history.
type SessionMessage struct {
	Role    string    `json:"role"`
	Content string    `json:"content"`
	At      time.Time `json:"at"`
}

// Session is a conversation as listed (Messages only in history views).
type Session struct {
	ID               uuid.UUID `json:"id"`
	Key              string    `json:"key"`
	AgentID          uuid.UUID `json:"agent_id"`
	UserID           string    `json:"user_id"`
	Channel          string    `json:"channel"`
	Label            string    `json:"label"`
	MessageCount     int       `json:"message_count"`
	PromptTokens     int64     `json:"prompt_tokens"`
	CompletionTokens int64     `json:"completion_tokens"`
	// CostUSD is what the session's turns cost at the prices of their
	// calls when they ran (turns recorded before prices count 0).
	CostUSD   float64          `json:"cost_usd"`
	CreatedAt time.Time        `json:"created_at"`
	UpdatedAt time.Time        `json:"updated_at"`
	Messages  []SessionMessage `json:"messages,omitempty"`
}

// sessionRec is a session (kind session, data v1): its id is derived from
// its key.
type sessionRec struct {
	ID               uuid.UUID        `json:"id"`
	Key              string           `json:"key"`
	AgentID          uuid.UUID        `json:"agent_id"`
	UserID           string           `json:"user_id"`
	Channel          string           `json:"channel"`
	Label            string           `json:"label,omitempty"`
	Messages         []SessionMessage `json:"messages,omitempty"`
	PromptTokens     int64            `json:"prompt_tokens"`
	CompletionTokens int64            `json:"completion_tokens"`
	CostNano         int64            `json:"cost_nano,omitempty"`
	CreatedAt        time.Time        `json:"created_at"`
	UpdatedAt        time.Time        `json:"updated_at"`
	// Seq is the WAL index of the last record applied to the session (its
	// save or its latest turn): replay skips records at or below it, so a
	// turn that a snapshot already holds is never appended twice. Absent
	// (0) in sessions written before it.
	Seq uint64 `json:"seq,omitempty"`
}

func (x *sessionRec) ref() (kind, uuid.UUID) { return kindSession, x.ID }

func (x *sessionRec) view(withMessages bool) Session {
	v := Session{ID: x.ID, Key: x.Key, AgentID: x.AgentID, UserID: x.UserID, Channel: x.Channel, Label: x.Label,
		MessageCount: len(x.Messages), PromptTokens: x.PromptTokens, CompletionTokens: x.CompletionTokens,
		CostUSD: nanoUSD(x.CostNano), CreatedAt: x.CreatedAt, UpdatedAt: x.UpdatedAt}
	if withMessages {
		v.Messages = orEmpty(slices.Clone(x.Messages))
	}
	return v
}

var sessionNS = uuid.MustParse("0f6f0c52-8d0e-4d8f-9c8e-2a4b7e1d3c55")

// sessionID is the id of user's session key. Session keys are scoped
// per owner: alice's "s1" and bob's "s1" are two sessions, and nobody can
// take (or learn of) another user's key. Sessions made before keys were
// scoped keep the id of their key alone (SHA-1 of the key in sessionNS).
func sessionID(user, key string) uuid.UUID {
	return uuid.NewSHA1(sessionNS, []byte(user+"\x00"+key))
}

// sessionName is a session's name in its shard's table: owner and key.
func sessionName(user, key string) string { return user + "\x00" + key }

// Turn is a begun turn: the session's history for the provider, and the
// agent to run.
type Turn struct {
	Session Session // with its messages
	AgentID uuid.UUID
}

// TurnResult is what a finished turn appends.
type TurnResult struct {
	User, Assistant                string
	PromptTokens, CompletionTokens int64
	// CostNano is what the turn's calls cost (their spans' prices).
	CostNano int64
	// Failed: the run failed or was aborted; only the user's message is
	// kept, so the history shows what was asked.
	Failed bool
}

// SessionFilter selects sessions; zero fields match everything.
type SessionFilter struct {
	AgentID uuid.UUID
	Channel string
	UserID  string
	Limit   int // 1..200, 0: 20
	Offset  int
}

// beginTurn is a turn waiting to begin on its session's tenant shard.
type beginTurn struct {
	key, agentRef, user, channel string
	cancel                       context.CancelFunc
	reply                        chan turnReply
	// anyUser runs the agent for a user it is not shared with: a
	// channel instance's sender (the instance binds the agent).
	anyUser bool
}

type turnReply struct {
	turn Turn
	err  error
}

// turnState is a session's in-memory turn bookkeeping (not durable: a
// restart ends every turn).
type turnState struct {
	busy    bool
	cancel  context.CancelFunc
	waiting []beginTurn
}

func (r *tenantShard) beginTurn(m beginTurn) {
	if r.turns == nil {
		r.turns = map[string]*turnState{}
	}
	name := sessionName(m.user, m.key)
	ts := r.turns[name]
	if ts == nil {
		ts = &turnState{}
		r.turns[name] = ts
	}
	ts.waiting = append(ts.waiting, m) // answered at once, or when the running turn ends
	if !ts.busy {
		r.startWaiting(name, ts)
	}
}

// openTurn finds or creates the session for a turn.
func (r *tenantShard) openTurn(m beginTurn) (Turn, error) {
	now := r.clock.Now().UTC()
	x, ok := r.part.sessions.named(sessionName(m.user, m.key))
	ref := m.agentRef
	if ref == "" && ok {
		ref = x.AgentID.String()
	}
	a, found := r.agent(ref)
	if !found || (!m.anyUser && !a.canUse(m.user)) {
		return Turn{}, fmt.Errorf("agent %q: %w", ref, ErrNotFound)
	}
	if ok && x.AgentID != a.ID {
		return Turn{}, fmt.Errorf("session %q belongs to another agent: %w", m.key, ErrInvalid)
	}
	if !ok && r.part.sessionsOf[m.user] >= r.quota.Sessions {
		return Turn{}, errQuota("sessions", "sessions_per_user", int64(r.quota.Sessions))
	}
	if !ok {
		x = &sessionRec{ID: sessionID(m.user, m.key), Key: m.key, AgentID: a.ID, UserID: m.user, Channel: m.channel,
			CreatedAt: now, UpdatedAt: now}
		if err := commit(r.log, r.part, entitySaved{x}); err != nil {
			return Turn{}, fmt.Errorf("log session: %w", err)
		}
	}
	return Turn{Session: x.view(true), AgentID: a.ID}, nil
}

func (r *tenantShard) endTurn(user, key string, res TurnResult) (Session, error) {
	name := sessionName(user, key)
	ts := r.turns[name]
	defer r.nextTurn(name, ts)
	x, ok := r.part.sessions.named(name)
	if !ok {
		return Session{}, ErrNotFound // deleted meanwhile
	}
	now := r.clock.Now().UTC()
	t := &turnJSON{SessionID: x.ID, PromptTokens: res.PromptTokens, CompletionTokens: res.CompletionTokens, CostNano: res.CostNano, At: now,
		Messages: []SessionMessage{{Role: "user", Content: res.User, At: now}}}
	if !res.Failed {
		t.Messages = append(t.Messages, SessionMessage{Role: "assistant", Content: res.Assistant, At: now})
	}
	if err := commit(r.log, r.part, sessionTurnAppended{t}); err != nil {
		return Session{}, fmt.Errorf("log session turn: %w", err)
	}
	x, _ = r.part.sessions.named(name)
	return x.view(false), nil
}

// appendTurn applies a session turn: a new session value with the turn's
// messages appended (the history bounded) and its tokens counted. A turn
// of a session deleted meanwhile changes nothing.
func (r *tenantPart) appendTurn(seq uint64, t *turnJSON) {
	x, ok := r.sessions.rows[t.SessionID]
	if !ok || reflects(x.Seq, seq) {
		return
	}
	next := *x
	next.Seq = max(seq, x.Seq)
	next.Messages = boundHistory(append(slices.Clone(x.Messages), t.Messages...))
	next.PromptTokens += t.PromptTokens
	next.CompletionTokens += t.CompletionTokens
	next.CostNano = satAdd(next.CostNano, max(t.CostNano, 0))
	next.UpdatedAt = t.At
	r.sessions.save(&next)
}

// reflects reports whether an entity whose watermark is mark already
// holds the record at seq (0: a snapshot's entity, never skipped).
func reflects(mark, seq uint64) bool { return seq != 0 && seq <= mark }

// saveSession applies a session's full state unless the session already
// reflects the record (its watermark is at or past seq).
func (r *tenantPart) saveSession(seq uint64, x *sessionRec) {
	if old, ok := r.sessions.rows[x.ID]; ok && reflects(old.Seq, seq) {
		return
	}
	if seq != 0 {
		x.Seq = seq
	}
	if old, ok := r.sessions.save(x); ok {
		r.countSession(old.UserID, -1)
	}
	r.countSession(x.UserID, 1)
}

// nextTurn frees the session and begins the next waiting turn, if any.
func (r *tenantShard) nextTurn(key string, ts *turnState) {
	if ts == nil {
		return
	}
	ts.busy, ts.cancel = false, nil
	r.startWaiting(key, ts)
}

// startWaiting begins the waiting turns of a free session in order until
// one runs (a turn that cannot open is answered with its error), and
// forgets the session when none runs or waits.
func (r *tenantShard) startWaiting(key string, ts *turnState) {
	for len(ts.waiting) > 0 && !ts.busy {
		m := ts.waiting[0]
		ts.waiting = ts.waiting[1:]
		turn, err := r.openTurn(m)
		if err == nil {
			ts.busy, ts.cancel = true, m.cancel
		}
		m.reply <- turnReply{turn: turn, err: err}
	}
	if !ts.busy && len(ts.waiting) == 0 {
		delete(r.turns, key)
	}
}

// boundHistory drops the oldest messages beyond the limits.
func boundHistory(msgs []SessionMessage) []SessionMessage {
	size := 0
	for _, m := range msgs {
		size += len(m.Content)
	}
	cut := 0
	for cut < len(msgs) && (len(msgs)-cut > MaxSessionMessages || size > MaxSessionBytes) {
		size -= len(msgs[cut].Content)
		cut++
	}
	return slices.Clip(msgs[cut:])
}

func (r *tenantShard) abortTurn(key, user string) error {
	name := sessionName(user, key)
	if _, ok := r.part.sessions.named(name); !ok {
		return ErrNotFound
	}
	ts := r.turns[name]
	if ts == nil || !ts.busy || ts.cancel == nil {
		return fmt.Errorf("session %q has no running turn: %w", key, ErrInUse)
	}
	ts.cancel()
	return nil
}

// sessionOp runs op (get, patch, delete, reset) on session x.
func (r *tenantShard) sessionOp(op string, x *sessionRec, label *string) (Session, error) {
	next := *x
	switch op {
	case "get":
		return x.view(true), nil
	case "delete":
		au := audit{action: "session.delete", entityType: string(kindSession), entityID: x.Key, summary: fmt.Sprintf("deleted session %q", x.Key)}
		if err := r.commit(sessionTenant(x.UserID), au, entityDeleted{kind: kindSession, id: x.ID}); err != nil {
			return Session{}, fmt.Errorf("log session delete: %w", err)
		}
		return x.view(false), nil
	case "patch":
		if label != nil {
			next.Label = *label
		}
	case "reset":
		next.Messages, next.PromptTokens, next.CompletionTokens = nil, 0, 0
	default:
		return Session{}, fmt.Errorf("session op %q: %w", op, ErrInvalid)
	}
	next.UpdatedAt = r.clock.Now().UTC()
	au := audit{action: "session." + op, entityType: string(kindSession), entityID: x.Key, summary: fmt.Sprintf("%s session %q", map[string]string{"patch": "relabelled", "reset": "reset"}[op], x.Key)}
	if err := r.commit(sessionTenant(x.UserID), au, entitySaved{&next}); err != nil {
		return Session{}, fmt.Errorf("log session: %w", err)
	}
	return next.view(false), nil
}

// listSessions returns the shard's sessions f selects (f.UserID's only
// unless admin).
func (p *tenantPart) listSessions(f SessionFilter, admin bool) []Session {
	var all []Session
	for _, x := range p.sessions.rows {
		switch {
		case !admin && x.UserID != f.UserID,
			f.UserID != "" && x.UserID != f.UserID,
			f.AgentID != uuid.Nil && x.AgentID != f.AgentID,
			f.Channel != "" && x.Channel != f.Channel:
			continue
		}
		all = append(all, x.view(false))
	}
	return all
}

// validSessionKey reports whether k can name a session.
func validSessionKey(k string) bool {
	return k != "" && len(k) <= maxSessionKey && ValidUserID(k)
}

// BeginTurn begins a turn of session key for user with agent agentRef ("":
// the session's agent), creating the session (on channel) on its first
// turn. It waits while another turn of the session runs. cancel is called
// by AbortTurn. Errors: ErrNotFound (unknown agent, or a session of
// another user), ErrInvalid.
func (g *Gateway) BeginTurn(ctx context.Context, key, agentRef, user, channel string, cancel context.CancelFunc) (Turn, error) {
	return g.QueueTurn(key, agentRef, user, channel, cancel)(ctx)
}

// QueueTurn is BeginTurn in two steps: it queues the turn now (turns of a
// session begin in the order they were queued) and returns the wait.
func (g *Gateway) QueueTurn(key, agentRef, user, channel string, cancel context.CancelFunc) func(ctx context.Context) (Turn, error) {
	return g.queueTurn(beginTurn{key: key, agentRef: agentRef, user: user, channel: channel, cancel: cancel})
}

// QueueChannelTurn is QueueTurn for a channel instance's sender: agent
// (an id) runs for user whether or not it is shared with them.
func (g *Gateway) QueueChannelTurn(key string, agent uuid.UUID, user, channel string, cancel context.CancelFunc) func(ctx context.Context) (Turn, error) {
	return g.queueTurn(beginTurn{key: key, agentRef: agent.String(), user: user, channel: channel, cancel: cancel, anyUser: true})
}

func (g *Gateway) queueTurn(m beginTurn) func(ctx context.Context) (Turn, error) {
	key, user := m.key, m.user
	switch {
	case !validSessionKey(key):
		err := fmt.Errorf("session key must be 1-%d printable characters: %w", maxSessionKey, ErrInvalid)
		return func(context.Context) (Turn, error) { return Turn{}, err }
	case user == "":
		err := fmt.Errorf("a session needs a user: %w", ErrInvalid)
		return func(context.Context) (Turn, error) { return Turn{}, err }
	}
	reply := make(chan turnReply, 1)
	m.reply = reply
	g.tenantAsks.Inc()
	g.root.Send(g.tenants[g.tenantFor(sessionTenant(user))], tenantCommand{run: func(t *tenantShard) { t.beginTurn(m) }})
	return func(ctx context.Context) (Turn, error) {
		select {
		case r := <-reply:
			return r.turn, r.err
		case <-ctx.Done():
			// The turn may still begin: end it at once so the session frees.
			go func() {
				if r := <-reply; r.err == nil {
					_, _ = g.EndTurn(context.Background(), user, key, TurnResult{Failed: true})
				}
			}()
			return Turn{}, fmt.Errorf("begin turn: %w", ctx.Err())
		}
	}
}

// EndTurn appends a finished turn to user's session key (durable on
// return) and begins the next waiting one.
func (g *Gateway) EndTurn(ctx context.Context, user, key string, res TurnResult) (Session, error) {
	return callTenant(ctx, g, g.tenantFor(sessionTenant(user)), func(t *tenantShard) (Session, error) { return t.endTurn(user, key, res) })
}

// AbortTurn cancels the running turn of user's session key; ErrInUse when
// none runs, ErrNotFound.
func (g *Gateway) AbortTurn(ctx context.Context, key, user string) error {
	_, err := callTenant(ctx, g, g.tenantFor(sessionTenant(user)), func(t *tenantShard) (struct{}, error) {
		return struct{}{}, t.abortTurn(key, user)
	})
	return err
}

// SessionOp runs op (get: with messages; patch: the label; reset: clear
// the history; delete) on user's session key. admin (a trusted backend
// acting for no user) names a session by its key alone: the one session
// of any user with that key, ErrInvalid when several users have one.
func (g *Gateway) SessionOp(ctx context.Context, op, key, user string, admin bool, label *string) (Session, error) {
	if label != nil && (len(*label) > 200 || !ValidUserID(*label) && *label != "") {
		return Session{}, fmt.Errorf("label must be at most 200 printable characters: %w", ErrInvalid)
	}
	if !admin || user != "" {
		return callTenant(ctx, g, g.tenantFor(sessionTenant(user)), func(t *tenantShard) (Session, error) {
			x, ok := t.part.sessions.named(sessionName(user, key))
			if !ok {
				return Session{}, fmt.Errorf("session %q: %w", key, ErrNotFound)
			}
			return t.sessionOp(op, x, label)
		})
	}
	owners, err := g.sessionOwners(ctx, key)
	switch {
	case err != nil:
		return Session{}, err
	case len(owners) == 0:
		return Session{}, fmt.Errorf("session %q: %w", key, ErrNotFound)
	case len(owners) > 1:
		return Session{}, fmt.Errorf("%d users have a session %q: name the user: %w", len(owners), key, ErrInvalid)
	}
	return g.SessionOp(ctx, op, key, owners[0], false, label)
}

// sessionOwners are the users who have a session key.
func (g *Gateway) sessionOwners(ctx context.Context, key string) ([]string, error) {
	parts, err := readTenants(ctx, g, nil, func(v tenantView) ([]string, error) { return v.sessionOwners(key), nil })
	if err != nil {
		return nil, fmt.Errorf("find session %q: %w", key, err)
	}
	return slices.Sorted(slices.Values(slices.Concat(parts...))), nil
}

// ListSessions lists sessions newest first: f.UserID's only unless admin.
func (g *Gateway) ListSessions(ctx context.Context, f SessionFilter, admin bool) ([]Session, int, error) {
	switch {
	case f.Limit == 0:
		f.Limit = 20
	case f.Limit < 1 || f.Limit > 200:
		return nil, 0, fmt.Errorf("limit must be in 1..200: %w", ErrInvalid)
	}
	if f.Offset < 0 {
		return nil, 0, fmt.Errorf("offset must be >= 0: %w", ErrInvalid)
	}
	parts, err := readTenants(ctx, g, nil, func(v tenantView) ([]Session, error) { return v.listSessions(f, admin), nil })
	if err != nil {
		return nil, 0, fmt.Errorf("list sessions: %w", err)
	}
	all := slices.Concat(parts...)
	slices.SortFunc(all, func(a, b Session) int {
		if c := b.UpdatedAt.Compare(a.UpdatedAt); c != 0 {
			return c
		}
		return strings.Compare(a.Key, b.Key)
	})
	lo, hi := page(len(all), f.Offset, f.Limit, 20)
	return slices.Clip(all[lo:hi]), len(all), nil
}
