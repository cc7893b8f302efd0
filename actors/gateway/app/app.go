package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	"gatehouse/actors/gateway"
	"gatehouse/actors/gateway/agentrun"
	"gatehouse/actors/gateway/mcppool"
	"gatehouse/actors/gateway/toolbox"
	"gatehouse/actors/gateway/toolexec"
	"gatehouse/actors/gateway/webhook"
	"gatehouse/actors/gateway/workspace"
)

// Config configures the application services.
type Config struct {
	// Webhook configures the webhook channel's callbacks.
	Webhook webhook.Config
	// Sandbox is where custom tools and stdio MCP servers run (cmd:
	// tools.sandbox, bwrap by default). Its zero value is bwrap.
	Sandbox toolexec.SandboxConfig
	// Limits bound a turn's message text and a provider's answer (cmd:
	// gateway.max_message_bytes, gateway.max_answer_bytes).
	Limits agentrun.Limits
	// MCP bounds the messages of the MCP servers (cmd:
	// gateway.mcp_max_message_bytes).
	MCP mcppool.Config
	// Registerer takes the provider calls' metrics (attempts, fallbacks,
	// keys cooling down); nil registers none.
	Registerer prometheus.Registerer
	// TurnLock serializes a session's turns across a cluster's nodes (cmd:
	// the cluster's session locks); nil on one node.
	TurnLock agentrun.TurnLock
}

// DefaultConfig returns the services' defaults. Its Sandbox is "none",
// as tools ran before the sandbox, so that embedders and tests keep
// running theirs (an MCP server from a package outside /usr needs its
// path in Sandbox.ReadOnly under bwrap); the gatehouse binary sets
// bwrap unless the operator chose "none".
func DefaultConfig() Config {
	return Config{Webhook: webhook.DefaultConfig(), Sandbox: toolexec.SandboxConfig{Mode: toolexec.SandboxNone}, Limits: agentrun.DefaultLimits(),
		MCP: mcppool.DefaultConfig()}
}

// Validate names the first bad field.
func (c Config) Validate() error {
	if err := c.Webhook.Validate(); err != nil {
		return fmt.Errorf("app: Webhook: %w", err)
	}
	if err := c.Sandbox.Validate(); err != nil {
		return fmt.Errorf("app: Sandbox: %w", err)
	}
	if err := c.Limits.Validate(); err != nil {
		return fmt.Errorf("app: Limits: %w", err)
	}
	if err := c.MCP.Validate(); err != nil {
		return fmt.Errorf("app: MCP: %w", err)
	}
	return nil
}

// App is the application services over one gateway.
type App struct {
	// Runtime runs agents: every run is a Turn.
	Runtime *agentrun.Runtime
	// Toolbox gives runs their custom and MCP tools and reports on the
	// MCP connections.
	Toolbox *toolbox.Box
	// Sandbox is where custom tools and stdio MCP servers run; its Check
	// says whether they can.
	Sandbox *toolexec.Sandbox
	// Webhooks is the webhook channel.
	Webhooks *webhook.Service
	// Workspaces are the agents' workspace files.
	Workspaces *workspace.Service
}

// New builds the services over g. lg nil discards logs.
func New(cfg Config, g *gateway.Gateway, lg *slog.Logger) (*App, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if lg == nil {
		lg = slog.New(slog.DiscardHandler)
	}
	sb, err := toolexec.NewSandbox(cfg.Sandbox)
	if err != nil {
		return nil, fmt.Errorf("app: %w", err)
	}
	box := toolbox.New(g, sb, cfg.MCP, g.Logger())
	rt, err := agentrun.New(agentrun.Deps{Agents: g, Recorder: g, Sessions: g, Prompts: g, Now: g.Now, Logger: g.Logger(),
		Memory: g, Delegations: g, Skills: g, Toolbox: box, TurnLock: cfg.TurnLock,
		Budgets: g, Prices: g, RequireKnownPrices: g.RequireKnownPrices()}) // budgets: docs/budgets.md
	if err != nil {
		return nil, fmt.Errorf("app: %w", err)
	}
	if err := rt.SetLimits(cfg.Limits); err != nil {
		return nil, fmt.Errorf("app: %w", err)
	}
	if cfg.Registerer != nil {
		if err := rt.RegisterMetrics(cfg.Registerer); err != nil {
			return nil, fmt.Errorf("app: provider metrics: %w", err)
		}
	}
	wh, err := webhook.New(cfg.Webhook, g, rt, lg)
	if err != nil {
		return nil, fmt.Errorf("app: %w", err)
	}
	return &App{Runtime: rt, Toolbox: box, Sandbox: sb, Webhooks: wh, Workspaces: workspace.New(g)}, nil
}

// Close ends the background work and closes the connections, waiting
// until ctx is done at most: the webhooks' async turns and callbacks,
// then the runtime's summons, providers and MCP servers.
func (a *App) Close(ctx context.Context) error {
	return errors.Join(a.Webhooks.Close(ctx), a.Runtime.Close(ctx))
}
