package gateway

import (
	"context"
	"encoding/json"
	"time"

	"gatehouse/actors/gateway"
	"gatehouse/actors/gateway/agentrun"
)

// SessionStore is what sessions need from the gateway. Safe for
// concurrent use.
type SessionStore interface {
	// QueueTurn queues a turn of session key (turns of a session begin in
	// the order queued) and returns the wait for it to begin: the WebSocket
	// reader queues chat.send in frame order, the runtime's turn (Begin
	// with TurnRequest.Queued) runs and ends it.
	QueueTurn(key, agentRef, user, channel string, cancel context.CancelFunc) func(ctx context.Context) (gateway.Turn, error)
	AbortTurn(ctx context.Context, key, user string) error
	SessionOp(ctx context.Context, op, key, user string, admin bool, label *string) (gateway.Session, error)
	ListSessions(ctx context.Context, f gateway.SessionFilter, admin bool) ([]gateway.Session, int, error)
}

var _ SessionStore = (*gateway.Gateway)(nil)

// sessionsIn is GET /v1/sessions (and sessions.list).
type sessionsIn struct {
	Limit   int    `query:"limit" json:"-"`
	Offset  int    `query:"offset" json:"-"`
	AgentID string `query:"agent_id" json:"-"`
	Channel string `query:"channel" json:"-"`
	UserID  string `query:"user_id" json:"-"`
}

type sessionPage struct {
	Data   []gateway.Session `json:"data"`
	Total  int               `json:"total"`
	Limit  int               `json:"limit"`
	Offset int               `json:"offset"`
}

func (s *Server) listSessions(ctx context.Context, c Caller, in sessionsIn) (sessionPage, error) {
	f := gateway.SessionFilter{Channel: in.Channel, UserID: in.UserID, Limit: in.Limit, Offset: in.Offset}
	var err error
	if f.AgentID, err = parseAgentID(in.AgentID); err != nil {
		return sessionPage{}, err
	}
	admin := c.principal().AdminsSessions()
	if !admin {
		if in.UserID != "" && in.UserID != c.UserID {
			return sessionPage{}, errUserBinding
		}
		f.UserID = c.UserID
		if f.UserID == "" {
			return sessionPage{}, errUserRequired
		}
	}
	ss, total, err := s.d.Sessions.ListSessions(ctx, f, admin)
	if err != nil {
		return sessionPage{}, err
	}
	limit := f.Limit
	if limit == 0 {
		limit = 20
	}
	return sessionPage{Data: nonNil(ss), Total: total, Limit: limit, Offset: f.Offset}, nil
}

// The WebSocket-only session methods (the seed: "other session operations
// go through WebSocket RPC sessions.* methods").

type chatSendIn struct {
	AgentID    string `json:"agentId"`
	SessionKey string `json:"sessionKey"`
	Message    string `json:"message"`
	Stream     bool   `json:"stream"`
}

type sessionKeyIn struct {
	SessionKey string  `json:"sessionKey"`
	Key        string  `json:"key"`
	Label      *string `json:"label"`
}

func (in sessionKeyIn) key() string {
	if in.SessionKey != "" {
		return in.SessionKey
	}
	return in.Key
}

// wsSessionMethods are the WebSocket-only methods and the scope each needs
// (chat.send, write, is queued on the reader: queueChatSend).
var wsSessionMethods = map[string]gateway.Scope{
	"chat.abort": gateway.ScopeWrite, "chat.history": gateway.ScopeRead,
	"sessions.preview": gateway.ScopeRead, "sessions.patch": gateway.ScopeWrite,
	"sessions.delete": gateway.ScopeWrite, "sessions.reset": gateway.ScopeWrite,
}

// sessionChecks are every session method's checks: the rate limit, the
// scope, a user (or a trusted backend acting for nobody).
func (w *wsConn) sessionChecks(ctx context.Context, need gateway.Scope) error {
	if err := w.s.admit(ctx, &Route{Scope: need}, w.c); err != nil { // the table routes' checks
		return err
	}
	if w.c.UserID == "" && !w.c.principal().AdminsSessions() {
		return errUserRequired
	}
	return nil
}

// queueChatSend runs on the reader, in frame order: it checks and queues
// the turn, so that two sends on one session run in the order they were
// sent, and returns the rest of the work for the request's goroutine.
func (w *wsConn) queueChatSend(f wsFrame) func() {
	fail := func(err error) func() { return func() { w.respond(f.ID, nil, err) } }
	ctx, cancel := context.WithTimeout(w.ctx, w.s.cfg.RequestTimeout)
	defer cancel()
	if err := w.sessionChecks(ctx, gateway.ScopeWrite); err != nil {
		return fail(err)
	}
	var in chatSendIn
	if err := json.Unmarshal(orEmpty(f.Params), &in); err != nil {
		return fail(errJSON(err.Error()))
	}
	if in.Message == "" {
		return fail(errInvalid("message must not be empty"))
	}
	if w.c.UserID == "" {
		return fail(errUserRequired)
	}
	run, stop := context.WithCancel(w.ctx) // a run is bounded by its agent's time limit
	wait := w.s.d.Sessions.QueueTurn(in.SessionKey, in.AgentID, w.c.UserID, "ws", stop)
	return func() {
		defer stop()
		w.chatSend(run, f.ID, in, wait)
	}
}

// wsSessionCall runs a WebSocket-only session method other than
// chat.send and answers the request.
func (w *wsConn) wsSessionCall(ctx context.Context, f wsFrame, need gateway.Scope) {
	s, c := w.s, w.c
	if err := w.sessionChecks(ctx, need); err != nil {
		w.respond(f.ID, nil, err)
		return
	}
	var in sessionKeyIn
	if err := json.Unmarshal(orEmpty(f.Params), &in); err != nil {
		w.respond(f.ID, nil, errJSON(err.Error()))
		return
	}
	var out any
	var err error
	switch f.Method {
	case "chat.abort":
		err = s.d.Sessions.AbortTurn(ctx, in.key(), c.UserID)
		out = map[string]bool{"aborted": err == nil}
	case "chat.history":
		var sess gateway.Session
		sess, err = s.d.Sessions.SessionOp(ctx, "get", in.key(), c.UserID, c.principal().AdminsSessions(), nil)
		out = map[string]any{"sessionKey": sess.Key, "messages": sess.Messages}
	case "sessions.preview":
		var sess gateway.Session
		sess, err = s.d.Sessions.SessionOp(ctx, "get", in.key(), c.UserID, c.principal().AdminsSessions(), nil)
		if n := len(sess.Messages); n > 10 {
			sess.Messages = sess.Messages[n-10:]
		}
		out = sess
	case "sessions.patch":
		out, err = s.d.Sessions.SessionOp(ctx, "patch", in.key(), c.UserID, c.principal().AdminsSessions(), in.Label)
	case "sessions.delete":
		out, err = s.d.Sessions.SessionOp(ctx, "delete", in.key(), c.UserID, c.principal().AdminsSessions(), nil)
	case "sessions.reset":
		out, err = s.d.Sessions.SessionOp(ctx, "reset", in.key(), c.UserID, c.principal().AdminsSessions(), nil)
	}
	w.respond(f.ID, out, err)
}

func orEmpty(b json.RawMessage) []byte {
	if len(b) == 0 {
		return []byte("{}")
	}
	return b
}

// chatSend runs one turn of a session: its history and the message go to
// the agent's provider, the answer (streamed as chat chunk events when
// asked) is appended to the session, with agent run events around it.
func (w *wsConn) chatSend(ctx context.Context, id string, in chatSendIn, wait func(context.Context) (gateway.Turn, error)) {
	s := w.s
	t, err := s.d.Runner.Begin(ctx, w.c.principal(), agentrun.TurnRequest{
		Agent: in.AgentID, SessionKey: in.SessionKey, Queued: wait, Endpoint: "chat.send", Channel: w.c.Channel,
		Messages: []agentrun.Message{{Role: "user", Content: in.Message}},
	})
	if err != nil {
		w.respond(id, nil, err)
		return
	}
	with := func(kv ...any) map[string]any {
		m := map[string]any{"run_id": t.ID, "sessionKey": in.SessionKey}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i].(string)] = kv[i+1]
		}
		return m
	}
	_ = w.event(id, "agent", with("kind", "run.started"))
	var onDelta func(string) error
	if in.Stream {
		onDelta = func(d string) error { return w.event(id, "chat", with("kind", "chunk", "delta", d)) }
	}
	start := time.Now()
	res, err := s.d.Runner.RunTurn(ctx, t, onDelta)
	if err != nil {
		if ctx.Err() != nil && w.ctx.Err() == nil {
			err = errAborted
		}
		_, d := s.mapError(err, w.lang, "WS", "chat.send")
		_ = w.event(id, "agent", with("kind", "run.failed", "error", d))
		w.respond(id, nil, err)
		return
	}
	_ = w.event(id, "chat", with("kind", "message", "role", "assistant", "content", res.Content))
	_ = w.event(id, "agent", with("kind", "run.completed", "duration_ms", time.Since(start).Milliseconds()))
	out := map[string]any{"run_id": t.ID, "sessionKey": in.SessionKey, "content": res.Content, "usage": usageOf(res.Result)}
	if rem := s.budgetRemaining(ctx, w.c, t.Agent.ID); rem != "" {
		out["budget_remaining"] = rem // as X-Gateway-Budget-Remaining (budgets.go)
	}
	w.respond(id, out, nil)
}
