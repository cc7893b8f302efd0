package gateway

import (
	"context"
	"fmt"

	"github.com/google/uuid"
)

// PlanRequest asks for the plan of one run (PlanRun).
type PlanRequest struct {
	// Agent is the agent's id or agent_key; "" is the default agent of
	// For.User (see DefaultAgent).
	Agent string
	// For is who the run is for. For.User is the run's user: whose
	// USER.md and MCP grants the plan holds ("": none). Unless
	// AnyCaller, For.MayRun decides whether the run may go ahead, on the
	// plan's view and before anything but the agent and its provider is
	// read: false is ErrNotFound, as for an agent that does not exist.
	For Principal
	// AnyCaller plans without deciding policy: for a run the caller
	// decided already.
	AnyCaller bool
	// AnyStatus plans an agent that is not active (one being summoned).
	AnyStatus bool
	// Bare plans the agent, its provider and its fallbacks only: no
	// USER.md, skills or tools (a run whose system prompt is replaced:
	// summoning, regenerating).
	Bare bool
	// Tools plans the agent's custom tools and MCP servers too, their
	// secrets opened (the runtime has a toolbox to run them).
	Tools bool
}

// RunPlan is everything a run plans from, read from one published view
// of the registry: no part of it is newer or older than another.
type RunPlan struct {
	// Agent is the agent as resolved, Provider its provider.
	Agent    Agent
	Provider Provider
	// Runnable is false for an agent that is not active (unless
	// PlanRequest.AnyStatus) or whose provider is disabled: the plan
	// then holds only Agent and Provider, for the caller to refuse.
	Runnable bool
	// Fallbacks are the agent's fallbacks whose provider exists, in
	// order, enabled or not.
	Fallbacks []PlannedFallback
	// UserContext is the user's USER.md for the agent ("" when none).
	UserContext string
	// Skills are the granted, enabled skills the run gets.
	Skills []RunSkill
	// Tools are the agent's custom tools and MCP servers for the user
	// (PlanRequest.Tools only).
	Tools RunTools
	// Version is the version of the registry's view the plan was read
	// from: every write moves it.
	Version uint64
}

// PlannedFallback is one of an agent's fallbacks with its provider.
type PlannedFallback struct {
	Provider Provider
	Model    string
}

// RunTools are the tools a run's plan names, ready to run.
type RunTools struct {
	// Custom are the enabled custom tools the agent runs with, env
	// opened (none while tool execution is off).
	Custom []RunnableTool
	// MCP are the servers a run of the agent for the user may use,
	// secrets opened (no stdio server while tool execution is off).
	MCP []MCPAccess
}

// testHookPlanned, set by tests, runs once PlanRun has read the agent
// and its provider, before it reads the rest: where a plan made of
// several reads would see another view.
var testHookPlanned func()

// PlanRun reads everything a run plans from (agent, provider, fallbacks,
// USER.md, skills, custom tools and MCP access) from one view of the
// registry, so that a change made meanwhile is in all of the plan or in
// none of it. Errors: ErrNotFound for no such agent (or no default
// agent), or one req.For may not run; ctx's; a secret that does not open.
func (g *Gateway) PlanRun(ctx context.Context, req PlanRequest) (RunPlan, error) {
	return read(ctx, g, func(r regView) (RunPlan, error) { return g.plan(r, req) })
}

func (g *Gateway) plan(r regView, req PlanRequest) (RunPlan, error) {
	ref := req.Agent
	if ref == "" {
		d, err := r.defaultAgent(req.For.User, g.cfg.DefaultAgent)
		if err != nil {
			return RunPlan{}, fmt.Errorf("default agent: %w", err)
		}
		ref = d.ID.String()
	}
	a, p, err := r.resolveAgent(ref)
	if err != nil {
		return RunPlan{}, err
	}
	if !req.AnyCaller && !req.For.MayRun(&a) {
		return RunPlan{}, fmt.Errorf("agent %q: %w", ref, ErrNotFound) // a stranger's agent: ids do not leak
	}
	pl := RunPlan{Agent: a, Provider: p, Version: r.part.version,
		Runnable: (a.Status == AgentActive || req.AnyStatus) && p.Enabled}
	if testHookPlanned != nil {
		testHookPlanned()
	}
	if !pl.Runnable {
		return pl, nil
	}
	for _, f := range a.Fallbacks {
		if fp, ok := r.part.providers.rows[f.ProviderID]; ok {
			pl.Fallbacks = append(pl.Fallbacks, PlannedFallback{Provider: fp.view(), Model: f.Model})
		}
	}
	if req.Bare {
		return pl, nil
	}
	if req.For.User != "" {
		pl.UserContext = r.userContext(a.ID, req.For.User)
	}
	pl.Skills = r.runSkills(a.ID)
	if req.Tools {
		if pl.Tools, err = g.runTools(r, a.ID, req.For.User); err != nil {
			return RunPlan{}, err
		}
	}
	return pl, nil
}

// runTools are agent's custom tools and MCP servers for user in view r,
// secrets opened.
func (g *Gateway) runTools(r regView, agent uuid.UUID, user string) (RunTools, error) {
	var rt RunTools
	if g.cfg.ToolsExecEnabled && g.cfg.WorkspaceDir != "" {
		custom, err := g.runnable(r.listTools(agent, true))
		if err != nil {
			return RunTools{}, err
		}
		rt.Custom = custom
	}
	mcp, err := g.openAccess(r.accessMCP(agent, user))
	if err != nil {
		return RunTools{}, err
	}
	rt.MCP = mcp
	return rt, nil
}
