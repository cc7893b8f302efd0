// Package toolbox gives an agent's runs their tools (runtime.Toolbox):
// the agent's custom tools and the global ones, run by package toolexec
// in the agent's workspace, and the tools of the MCP servers granted to
// the agent or to the user it runs for.
package toolbox

import (
	"context"
	"encoding/json"
	"time"

	"github.com/google/uuid"

	"gatehouse/actors/gateway"
	"gatehouse/actors/gateway/runtime"
	"gatehouse/actors/gateway/toolexec"
)

// Source is what the toolbox needs from the gateway.
type Source interface {
	// AgentCustomTools returns the enabled custom tools agent runs with,
	// env opened (none when tool execution is off).
	AgentCustomTools(ctx context.Context, agent uuid.UUID) ([]gateway.RunnableTool, error)
	// WorkspaceOf is the agent's workspace directory.
	WorkspaceOf(agent uuid.UUID) string
}

var _ Source = (*gateway.Gateway)(nil)

// Box is the production Toolbox. It is safe for concurrent use.
type Box struct {
	src Source
}

var _ runtime.Toolbox = (*Box)(nil)

// New returns a Box over src.
func New(src Source) *Box { return &Box{src: src} }

// Tools lists a's tools for user.
func (b *Box) Tools(ctx context.Context, a gateway.Agent, _ string) ([]runtime.Tool, error) {
	cts, err := b.src.AgentCustomTools(ctx, a.ID)
	if err != nil {
		return nil, err
	}
	ws := b.src.WorkspaceOf(a.ID)
	out := make([]runtime.Tool, 0, len(cts))
	for _, ct := range cts {
		out = append(out, customTool(ct, ws))
	}
	return out, nil
}

// customTool is ct as a runtime tool.
func customTool(ct gateway.RunnableTool, workspace string) runtime.Tool {
	secrets := make([]string, 0, len(ct.Env))
	for _, v := range ct.Env {
		secrets = append(secrets, v)
	}
	spec := toolexec.Spec{Argv: ct.Command, Workspace: workspace, Dir: ct.WorkingDir, Env: ct.Env,
		Timeout: time.Duration(ct.TimeoutSeconds) * time.Second}
	return runtime.Tool{
		Name: ct.Name, Description: ct.Description, Parameters: ct.Parameters, Kind: gateway.SpanTool, Secrets: secrets,
		Call: func(ctx context.Context, args json.RawMessage) (string, error) {
			return toolexec.Run(ctx, spec, args)
		},
	}
}
