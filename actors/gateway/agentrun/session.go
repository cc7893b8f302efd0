package agentrun

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"

	"gatehouse/actors/gateway"
)

// beginSession begins a turn of a session: policy on the named agent
// first (a channel's sender: the instance's agent), then the turn is
// queued (or the transport's queued wait taken) and begun, then the run
// prepared over the session's history. A failure after the turn began
// ends it, so the session's next turn can begin.
func (rt *Runtime) beginSession(ctx context.Context, p gateway.Principal, req TurnRequest) (*Turn, error) {
	ss := rt.sessions
	t := &Turn{SessionKey: req.SessionKey, owner: p.User, asked: lastUserMessage(req.Messages)}
	wait := req.Queued
	if wait == nil {
		var err error
		if wait, err = rt.queue(ctx, ss, p, req, t); err != nil {
			return nil, err
		}
	}
	turn, err := wait(ctx)
	if err != nil {
		t.done()
		if errors.Is(err, gateway.ErrNotFound) { // no such agent, or another user's session
			return nil, fmt.Errorf("%w: %w", ErrAgentNotFound, err)
		}
		return nil, err
	}
	if err := rt.lockTurn(ctx, t, &turn); err != nil {
		rt.endTurn(ctx, t, Result{}, err)
		return nil, err
	}
	if err := rt.prepareTurn(ctx, p, req, t, turn); err != nil {
		rt.endTurn(ctx, t, Result{}, err)
		return nil, err
	}
	return t, nil
}

// queue decides policy on the named agent and queues the session turn;
// an abort of the turn is seen through t.aborted.
func (rt *Runtime) queue(ctx context.Context, ss Sessions, p gateway.Principal, req TurnRequest, t *Turn) (func(context.Context) (gateway.Turn, error), error) {
	if p.BoundAgent != uuid.Nil {
		t.aborted, t.release = context.WithCancel(context.Background())
		return ss.QueueChannelTurn(req.SessionKey, p.BoundAgent, p.User, req.Channel, t.release), nil
	}
	ref := req.Agent
	if ref != "" {
		a, err := rt.resolve(ctx, p, ref)
		if err != nil {
			return nil, err
		}
		ref = a.ID.String()
	}
	t.aborted, t.release = context.WithCancel(context.Background())
	return ss.QueueTurn(req.SessionKey, ref, p.User, req.Channel, t.release), nil
}

// lockTurn takes the session's cluster-wide turn lock, when there is one,
// and reads the session's history again under it: the history handed out
// when the turn began locally may miss a turn another node recorded.
func (rt *Runtime) lockTurn(ctx context.Context, t *Turn, turn *gateway.Turn) error {
	if rt.turnLock == nil {
		return nil
	}
	unlock, err := rt.turnLock.Lock(ctx, t.owner, t.SessionKey)
	if err != nil {
		return fmt.Errorf("session %q: %w", t.SessionKey, err)
	}
	t.unlock = unlock
	s, err := rt.sessions.SessionOp(ctx, "get", t.SessionKey, t.owner, false, nil)
	if err != nil {
		return fmt.Errorf("session %q: %w", t.SessionKey, err)
	}
	turn.Session = s
	return nil
}

// prepareTurn decides policy on the session's agent and prepares the
// run: the session's history, then the request's messages.
func (rt *Runtime) prepareTurn(ctx context.Context, p gateway.Principal, req TurnRequest, t *Turn, turn gateway.Turn) error {
	msgs := make([]Message, 0, len(turn.Session.Messages)+len(req.Messages))
	for _, m := range turn.Session.Messages {
		msgs = append(msgs, Message{Role: m.Role, Content: m.Content})
	}
	run := req.run(p, append(msgs, req.Messages...))
	pl, err := rt.plan(ctx, turn.AgentID.String(), p, true, run)
	if err != nil {
		return err
	}
	rn, err := rt.prepare(ctx, pl, run)
	if err != nil {
		return err
	}
	t.ID, t.Agent, t.run = rn.ID, rn.Agent, rn
	return nil
}

// endTurn records a session turn's outcome (the question, and the answer
// unless runErr), durable, even when ctx has ended; a session deleted
// meanwhile is not an error. Without a session it only releases t.
func (rt *Runtime) endTurn(ctx context.Context, t *Turn, res Result, runErr error) {
	defer t.done()
	if t.unlock != nil {
		defer t.unlock() // after the turn is recorded
	}
	if t.SessionKey == "" {
		return
	}
	ectx, cancel := context.WithTimeout(context.WithoutCancel(ctx), recordTimeout)
	defer cancel()
	var cost int64
	if t.run != nil {
		cost = t.run.costNano
	}
	_, err := rt.sessions.EndTurn(ectx, t.owner, t.SessionKey, gateway.TurnResult{User: t.asked, Assistant: res.Content,
		PromptTokens: res.PromptTokens, CompletionTokens: res.CompletionTokens, CostNano: cost, Failed: runErr != nil})
	if err != nil && !errors.Is(err, gateway.ErrNotFound) {
		rt.lg.Error("session turn not recorded", "session", t.SessionKey, "err", err)
	}
}

// done releases the turn's abort context.
func (t *Turn) done() {
	if t.release != nil {
		t.release()
	}
}
