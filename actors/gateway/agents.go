package gateway

import (
	"context"
	"fmt"
)

// CreateAgent creates an agent owned by user. ErrExists for a taken
// agent_key, ErrInvalid.
func (g *Gateway) CreateAgent(ctx context.Context, user string, in AgentInput) (Agent, error) {
	return g.agentCmd(ctx, putAgent{user: user, in: in})
}

// UpdateAgent changes the agent (id or agent_key). ErrNotFound when the
// user cannot see it, ErrForbidden when the user is not its owner.
func (g *Gateway) UpdateAgent(ctx context.Context, user, ref string, in AgentInput) (Agent, error) {
	return g.agentCmd(ctx, putAgent{ref: ref, user: user, in: in})
}

func (g *Gateway) agentCmd(ctx context.Context, m putAgent) (Agent, error) {
	if m.user == "" {
		return Agent{}, fmt.Errorf("user id is required: %w", ErrInvalid)
	}
	m.reply = make(chan agentReply, 1)
	g.root.Send(g.registry, m)
	r, err := await(ctx, m.reply)
	return r.a, cmpErr(r.err, err)
}

// GetAgent finds an agent the user can use, by id or agent_key.
func (g *Gateway) GetAgent(ctx context.Context, user, ref string) (Agent, error) {
	reply := make(chan agentReply, 1)
	g.root.Send(g.registry, getAgent{ref: ref, user: user, reply: reply})
	r, err := await(ctx, reply)
	return r.a, cmpErr(r.err, err)
}

// ResolveAgent finds an agent by id or agent_key with its provider, for a
// run; no ownership check (the caller's token was authorized).
func (g *Gateway) ResolveAgent(ctx context.Context, ref string) (Agent, Provider, error) {
	reply := make(chan agentReply, 1)
	g.root.Send(g.registry, getAgent{ref: ref, resolve: true, reply: reply})
	r, err := await(ctx, reply)
	return r.a, r.p, cmpErr(r.err, err)
}

// ListAgents returns the agents user owns or that are shared with them.
func (g *Gateway) ListAgents(ctx context.Context, user string) ([]Agent, error) {
	reply := make(chan agentReply, 1)
	g.root.Send(g.registry, listAgents{user: user, reply: reply})
	r, err := await(ctx, reply)
	return r.as, cmpErr(r.err, err)
}

// DeleteAgent removes the agent; ErrNotFound, ErrForbidden as UpdateAgent.
func (g *Gateway) DeleteAgent(ctx context.Context, user, ref string) error {
	reply := make(chan agentReply, 1)
	g.root.Send(g.registry, delAgent{ref: ref, user: user, reply: reply})
	r, err := await(ctx, reply)
	return cmpErr(r.err, err)
}
