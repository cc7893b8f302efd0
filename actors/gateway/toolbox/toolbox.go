// Package toolbox gives an agent's runs their tools (agentrun.Toolbox):
// the agent's custom tools and the global ones, run by package toolexec
// in the agent's workspace, and the tools of the MCP servers granted to
// the agent or to the user it runs for, called through package mcppool.
package toolbox

import (
	"cmp"
	"context"
	"encoding/json"
	"log/slog"
	"regexp"
	"slices"
	"time"

	"github.com/google/uuid"

	"gatehouse/actors/gateway"
	"gatehouse/actors/gateway/agentrun"
	"gatehouse/actors/gateway/mcppool"
	"gatehouse/actors/gateway/toolexec"
)

// Source is what the toolbox needs from the gateway.
type Source interface {
	// WorkspaceOf is the agent's workspace directory.
	WorkspaceOf(agent uuid.UUID) string
	// MCPAccessFor lists the servers a run of agent for user may use.
	MCPAccessFor(ctx context.Context, agent uuid.UUID, user string) ([]gateway.MCPAccess, error)
	// MCPServerSecrets returns a server with its secrets opened.
	MCPServerSecrets(ctx context.Context, ref string) (gateway.MCPServer, gateway.MCPSecrets, error)
	// MCPWorkspace is a stdio server's working directory.
	MCPWorkspace(server uuid.UUID) string
	// MCPCache is the npm cache the stdio servers share.
	MCPCache() string
}

var _ Source = (*gateway.Gateway)(nil)

// Box is the production Toolbox. It is safe for concurrent use.
type Box struct {
	src  Source
	sb   *toolexec.Sandbox
	pool *mcppool.Pool
	lg   *slog.Logger
}

var _ agentrun.Toolbox = (*Box)(nil)

// New returns a Box over src whose custom tools and stdio MCP servers run
// in sb (nil: they refuse to run), its MCP connections bounded by mcp;
// Close closes them.
func New(src Source, sb *toolexec.Sandbox, mcp mcppool.Config, lg *slog.Logger) *Box {
	if lg == nil {
		lg = slog.New(slog.DiscardHandler)
	}
	return &Box{src: src, sb: sb, pool: mcppool.New(mcp, sb, lg), lg: lg.With("component", "toolbox")}
}

// Close closes every MCP connection.
func (b *Box) Close() { b.pool.Close() }

// Forget closes server id's connection (changed, disabled or deleted).
func (b *Box) Forget(id uuid.UUID) { b.pool.Forget(id) }

// Status connects to server ref if needed and reports its state and tools.
func (b *Box) Status(ctx context.Context, ref string) (mcppool.Status, error) {
	s, sec, err := b.src.MCPServerSecrets(ctx, ref)
	if err != nil {
		return mcppool.Status{}, err
	}
	if !s.Enabled {
		return mcppool.Status{Error: "disabled", Tools: []mcppool.Tool{}}, nil
	}
	wctx, cancel := waitCtx(ctx, statusWait)
	defer cancel()
	return b.pool.Status(wctx, b.spec(s, sec)), nil
}

func (b *Box) spec(s gateway.MCPServer, sec gateway.MCPSecrets) mcppool.Spec {
	return mcppool.Spec{ID: s.ID, Name: s.Name, Transport: s.Transport, Command: s.Command, Args: s.Args, URL: s.URL,
		Headers: sec.Headers, Env: sec.Env, Workspace: b.src.MCPWorkspace(s.ID), Cache: b.src.MCPCache(),
		Timeout: time.Duration(s.TimeoutSec) * time.Second, Version: s.UpdatedAt}
}

// statusWait and toolsWait bound how long a status request and a run
// wait for a server that is starting: the attempt goes on without them,
// and the next one finds it up. A run's wait is at most half of what is
// left of its context, so that the run itself still has time.
const (
	statusWait = 3 * time.Second
	toolsWait  = 8 * time.Second
)

// waitCtx is ctx bounded to d, and to half of what ctx has left.
func waitCtx(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if dl, ok := ctx.Deadline(); ok {
		d = min(d, time.Until(dl)/2)
	}
	return context.WithTimeout(ctx, d)
}

// Peek reports server id's connection as it is now, without connecting.
func (b *Box) Peek(id uuid.UUID) mcppool.Status { return b.pool.Peek(id) }

// Starting names the MCP servers agent's runs for user may use whose
// connection is being opened right now (a first start may take a minute):
// a tool of theirs missing from the agent's tools is not there yet.
func (b *Box) Starting(ctx context.Context, agent uuid.UUID, user string) ([]string, error) {
	access, err := b.src.MCPAccessFor(ctx, agent, user)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, acc := range access {
		if b.pool.Starting(acc.Server.ID) {
			out = append(out, acc.Server.Name)
		}
	}
	return out, nil
}

// Tools makes a's planned tools runnable (the custom tools and MCP
// access of its run's plan, gateway.RunPlan.Tools): custom tools, then
// the granted MCP servers' tools (a server that cannot be reached is left
// out of this run, and logged). An MCP tool whose name is taken gets its
// server's tool_prefix (or name) and "_" in front.
func (b *Box) Tools(ctx context.Context, a gateway.Agent, planned gateway.RunTools) ([]agentrun.Tool, error) {
	cts := planned.Custom
	ws := b.src.WorkspaceOf(a.ID)
	taken := map[string]bool{}
	for _, n := range gateway.BuiltinTools {
		taken[n] = true
	}
	out := make([]agentrun.Tool, 0, len(cts))
	for _, ct := range cts {
		out = append(out, customTool(ct, ws, b.sb))
		taken[ct.Name] = true
	}
	for _, acc := range planned.MCP {
		spec := b.spec(acc.Server, acc.Secrets)
		wctx, cancel := waitCtx(ctx, toolsWait)
		tools, err := b.pool.Tools(wctx, spec)
		cancel()
		if err != nil {
			b.lg.Warn("mcp server left out of a run", "server", acc.Server.Name, "agent", a.AgentKey, "err", err)
			continue
		}
		secrets := secretValues(acc.Secrets)
		for _, t := range tools {
			if !slices.ContainsFunc(acc.Grants, func(g gateway.MCPGrant) bool { return g.Allows(t.Name) }) {
				continue
			}
			name := fnName(t.Name)
			if taken[name] {
				name = fnName(cmp.Or(acc.Server.ToolPrefix, acc.Server.Name) + "_" + t.Name)
			}
			if taken[name] {
				continue
			}
			taken[name] = true
			out = append(out, b.mcpTool(spec, t, name, secrets))
		}
	}
	return out, nil
}

func (b *Box) mcpTool(spec mcppool.Spec, t mcppool.Tool, name string, secrets []string) agentrun.Tool {
	params := t.InputSchema
	if len(params) == 0 || string(params) == "null" {
		params = json.RawMessage(`{"type":"object","properties":{}}`)
	}
	return agentrun.Tool{
		Name: name, Aliases: []string{spec.Name + "." + t.Name}, Description: t.Description, Parameters: params,
		Kind: gateway.SpanTool, Secrets: secrets,
		Call: func(ctx context.Context, args json.RawMessage) (string, error) {
			return b.pool.Call(ctx, spec, t.Name, args)
		},
	}
}

var fnUnsafe = regexp.MustCompile(`[^a-zA-Z0-9_-]`)

// fnName is name as an OpenAI function name: [a-zA-Z0-9_-], at most 64.
func fnName(name string) string {
	n := fnUnsafe.ReplaceAllString(name, "_")
	if len(n) > 64 {
		n = n[:64]
	}
	return n
}

func secretValues(sec gateway.MCPSecrets) []string {
	var out []string
	for _, v := range sec.Headers {
		out = append(out, v)
	}
	for _, v := range sec.Env {
		out = append(out, v)
	}
	return out
}

// customTool is ct as a runtime tool.
func customTool(ct gateway.RunnableTool, workspace string, sb *toolexec.Sandbox) agentrun.Tool {
	secrets := make([]string, 0, len(ct.Env))
	for _, v := range ct.Env {
		secrets = append(secrets, v)
	}
	spec := toolexec.Spec{Argv: ct.Command, Workspace: workspace, Dir: ct.WorkingDir, Env: ct.Env,
		Timeout: time.Duration(ct.TimeoutSeconds) * time.Second, Sandbox: sb}
	return agentrun.Tool{
		Name: ct.Name, Description: ct.Description, Parameters: ct.Parameters, Kind: gateway.SpanTool, Secrets: secrets,
		Call: func(ctx context.Context, args json.RawMessage) (string, error) {
			return toolexec.Run(ctx, spec, args)
		},
	}
}
