package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/valyala/fasthttp"

	"gatehouse/actors/gateway"
	"gatehouse/actors/gateway/agentrun"
	"gatehouse/actors/gateway/toolexec"
)

// ToolStore is what custom tools need from the gateway. Safe for
// concurrent use.
type ToolStore interface {
	CreateCustomTool(ctx context.Context, in gateway.CustomToolInput) (gateway.CustomTool, error)
	UpdateCustomTool(ctx context.Context, ref string, in gateway.CustomToolInput) (gateway.CustomTool, error)
	GetCustomTool(ctx context.Context, ref string) (gateway.CustomTool, error)
	ListCustomTools(ctx context.Context, agent uuid.UUID) ([]gateway.CustomTool, error)
	DeleteCustomTool(ctx context.Context, ref string) error
}

var _ ToolStore = (*gateway.Gateway)(nil)

type toolsIn struct {
	AgentID string `query:"agent_id" json:"-"`
	Limit   int    `query:"limit" json:"-"`
	Offset  int    `query:"offset" json:"-"`
}

type toolPage struct {
	Data   []gateway.CustomTool `json:"data"`
	Total  int                  `json:"total"`
	Limit  int                  `json:"limit"`
	Offset int                  `json:"offset"`
}

func (s *Server) listTools(ctx context.Context, c Caller, in toolsIn) (toolPage, error) {
	var err error
	if in.Limit, err = pageBounds(in.Limit, in.Offset); err != nil {
		return toolPage{}, err
	}
	agent, err := s.agentRefID(ctx, in.AgentID)
	if err != nil {
		return toolPage{}, err
	}
	ts, err := s.d.Tools.ListCustomTools(ctx, agent)
	if err != nil {
		return toolPage{}, err
	}
	page := toolPage{Data: []gateway.CustomTool{}, Total: len(ts), Limit: in.Limit, Offset: in.Offset}
	if in.Offset < len(ts) {
		page.Data = shownAll(c, ts[in.Offset:min(in.Offset+in.Limit, len(ts))])
	}
	return page, nil
}

type toolCreateIn struct {
	gateway.CustomToolInput
}

type toolUpdateIn struct {
	ID string `path:"id" json:"-"`
	gateway.CustomToolInput
}

func (s *Server) createTool(ctx context.Context, _ Caller, in toolCreateIn) (gateway.CustomTool, error) {
	return s.d.Tools.CreateCustomTool(ctx, in.CustomToolInput)
}

func (s *Server) getTool(ctx context.Context, c Caller, in idIn) (gateway.CustomTool, error) {
	t, err := s.d.Tools.GetCustomTool(ctx, in.ID)
	return shown(c, t), err
}

func (s *Server) updateTool(ctx context.Context, _ Caller, in toolUpdateIn) (gateway.CustomTool, error) {
	return s.d.Tools.UpdateCustomTool(ctx, in.ID, in.CustomToolInput)
}

func (s *Server) deleteTool(ctx context.Context, _ Caller, in idIn) (None, error) {
	return None{}, s.d.Tools.DeleteCustomTool(ctx, in.ID)
}

// invokeIn is POST /v1/tools/invoke.
type invokeIn struct {
	Tool    string          `json:"tool"`
	Args    json.RawMessage `json:"args"`
	AgentID string          `json:"agentId"`
	DryRun  bool            `json:"dryRun"`
}

type invokeOut struct {
	Tool        string          `json:"tool"`
	AgentID     uuid.UUID       `json:"agent_id"`
	Kind        string          `json:"kind"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
	Output      *string         `json:"output,omitempty"`
	DurationMs  int64           `json:"duration_ms"`
	DryRun      bool            `json:"dry_run,omitempty"`
}

// invoke runs one tool as the agent would for the caller's user: the
// agent is agentId, else X-Gateway-Agent-Id, else the user's default
// agent; its tools are exactly the ones its runs get. A tool that fails
// is 422 FAILED_PRECONDITION with its output in error.output.
func (s *Server) invoke(ctx context.Context, c Caller, in invokeIn) (invokeOut, error) {
	if in.Tool == "" {
		return invokeOut{}, errInvalid("tool: required")
	}
	if len(in.Args) == 0 || string(in.Args) == "null" {
		in.Args = json.RawMessage("{}")
	}
	var obj map[string]any
	if json.Unmarshal(in.Args, &obj) != nil {
		return invokeOut{}, errInvalid("args: must be a JSON object")
	}
	ref := in.AgentID
	if ref == "" {
		ref = c.AgentID
	}
	if ref == "" {
		a, err := s.d.Agents.DefaultAgent(ctx, c.UserID)
		if err != nil {
			return invokeOut{}, resource(err, errInvalidAgentRef, nil)
		}
		ref = a.ID.String()
	}
	a, tools, err := s.d.Runner.ToolsFor(ctx, c.principal(), ref)
	if err != nil {
		return invokeOut{}, err
	}
	var tool *agentrun.Tool
	for i := range tools {
		if tools[i].Name == in.Tool || slices.Contains(tools[i].Aliases, in.Tool) {
			tool = &tools[i]
		}
	}
	if tool == nil {
		// A tool of a server still starting (a first npx download) is not
		// there yet: say so, retryable, rather than "no such tool".
		if starting, err := s.d.MCPLive.Starting(ctx, a.ID, c.UserID); err == nil && len(starting) > 0 {
			return invokeOut{}, errMCPStarting(strings.Join(starting, ", "))
		}
		return invokeOut{}, newError(fasthttp.StatusNotFound, codeNotFound, msgInvalid, fmt.Sprintf("agent %s has no tool %q", a.AgentKey, in.Tool))
	}
	out := invokeOut{Tool: tool.Name, AgentID: a.ID, Kind: tool.Kind, Description: tool.Description, Parameters: tool.Parameters}
	if in.DryRun {
		out.DryRun = true
		return out, nil
	}
	out.Description, out.Parameters = "", nil
	start := time.Now()
	text, err := tool.Call(ctx, in.Args)
	out.DurationMs = time.Since(start).Milliseconds()
	if err != nil {
		if errors.Is(err, toolexec.ErrSpec) || errors.Is(err, gateway.ErrInvalid) {
			return invokeOut{}, errInvalid(err.Error())
		}
		e := newError(fasthttp.StatusUnprocessableEntity, codePrecondition, msgToolFailed, tool.Name, err.Error())
		e.output = text
		return invokeOut{}, e
	}
	out.Output = &text
	return out, nil
}

var errInvalidAgentRef = newError(fasthttp.StatusBadRequest, codeInvalid, msgInvalid, "agentId: required (the user has no default agent)")
