package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"gatehouse/actors/gateway"
	"gatehouse/actors/gateway/runtime"
	"gatehouse/actors/gateway/toolbox"
	"gatehouse/actors/gateway/webhook"
	"gatehouse/actors/gateway/workspace"
)

// Config configures the application services.
type Config struct {
	// Webhook configures the webhook channel's callbacks.
	Webhook webhook.Config
}

// DefaultConfig returns the services' defaults.
func DefaultConfig() Config { return Config{Webhook: webhook.DefaultConfig()} }

// Validate names the first bad field.
func (c Config) Validate() error {
	if err := c.Webhook.Validate(); err != nil {
		return fmt.Errorf("app: Webhook: %w", err)
	}
	return nil
}

// App is the application services over one gateway.
type App struct {
	// Runtime runs agents: every run is a Turn.
	Runtime *runtime.Runtime
	// Toolbox gives runs their custom and MCP tools and reports on the
	// MCP connections.
	Toolbox *toolbox.Box
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
	rt := runtime.New(g, g)
	box := toolbox.New(g, g.Logger())
	rt.SetToolbox(box)
	wh, err := webhook.New(cfg.Webhook, g, rt, lg)
	if err != nil {
		return nil, fmt.Errorf("app: %w", err)
	}
	return &App{Runtime: rt, Toolbox: box, Webhooks: wh, Workspaces: workspace.New(g)}, nil
}

// Close ends the background work and closes the connections, waiting
// until ctx is done at most: the webhooks' async turns and callbacks,
// then the runtime's summons, providers and MCP servers.
func (a *App) Close(ctx context.Context) error {
	return errors.Join(a.Webhooks.Close(ctx), a.Runtime.Close(ctx))
}
