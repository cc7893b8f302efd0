package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/google/uuid"
)

// Custom tools: commands on the host that agents may call (see package
// toolexec for how they run). The tool's env is write-only: sealed with
// the master key (bound to the tool id), never returned, only its names.

// Built-in tool names, reserved.
var BuiltinTools = []string{"delegate", "memory_search", "memory_save"}

// CustomTool is a custom tool as the API shows it.
type CustomTool struct {
	ID             uuid.UUID       `json:"id"`
	Name           string          `json:"name"`
	Description    string          `json:"description"`
	Parameters     json.RawMessage `json:"parameters"`
	Command        []string        `json:"command"`
	WorkingDir     string          `json:"working_dir"`
	TimeoutSeconds int             `json:"timeout_seconds"`
	AgentID        *uuid.UUID      `json:"agent_id"`
	EnvKeys        []string        `json:"env_keys"` // the names; values are never shown
	Enabled        bool            `json:"enabled"`
	CreatedAt      time.Time       `json:"created_at"`
	UpdatedAt      time.Time       `json:"updated_at"`
}

// CustomToolInput creates or changes a custom tool; on update nil fields
// keep their value, Env nil keeps the env.
type CustomToolInput struct {
	Name           *string           `json:"name"`
	Description    *string           `json:"description"`
	Parameters     json.RawMessage   `json:"parameters"`
	Command        []string          `json:"command"`
	WorkingDir     *string           `json:"working_dir"`
	TimeoutSeconds *int              `json:"timeout_seconds"`
	AgentID        *string           `json:"agent_id"` // id or agent_key; "" for a global tool
	Env            map[string]string `json:"env"`
	Enabled        *bool             `json:"enabled"`
}

// Limits of a custom tool.
const (
	DefaultToolTimeout = 60
	MaxToolTimeout     = 3600
)

// customToolRec is the durable tool (kind custom_tool, data v1).
type customToolRec struct {
	ID             uuid.UUID       `json:"id"`
	Name           string          `json:"name"`
	Description    string          `json:"description"`
	Parameters     json.RawMessage `json:"parameters"`
	Command        []string        `json:"command"`
	WorkingDir     string          `json:"working_dir,omitempty"`
	TimeoutSeconds int             `json:"timeout_seconds"`
	AgentID        uuid.UUID       `json:"agent_id"` // uuid.Nil: global
	EnvSealed      []byte          `json:"env_sealed,omitempty"`
	EnvKeys        []string        `json:"env_keys,omitempty"`
	Enabled        bool            `json:"enabled"`
	CreatedAt      time.Time       `json:"created_at"`
	UpdatedAt      time.Time       `json:"updated_at"`
}

func (t *customToolRec) ref() (kind, uuid.UUID) { return kindCustomTool, t.ID }

func (t *customToolRec) view() CustomTool {
	v := CustomTool{ID: t.ID, Name: t.Name, Description: t.Description, Parameters: t.Parameters, Command: t.Command,
		WorkingDir: t.WorkingDir, TimeoutSeconds: t.TimeoutSeconds, EnvKeys: orEmpty(t.EnvKeys), Enabled: t.Enabled,
		CreatedAt: t.CreatedAt, UpdatedAt: t.UpdatedAt}
	if t.AgentID != uuid.Nil {
		id := t.AgentID
		v.AgentID = &id
	}
	return v
}

var toolNameRE = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,63}$`)
var envNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,127}$`)

// validSchema checks that p is a JSON object schema and returns it
// compact ({"type":"object"} when empty).
func validSchema(p json.RawMessage) (json.RawMessage, error) {
	if len(p) == 0 || string(p) == "null" {
		return json.RawMessage(`{"type":"object","properties":{}}`), nil
	}
	var m map[string]any
	if err := json.Unmarshal(p, &m); err != nil {
		return nil, fmt.Errorf("parameters: must be a JSON Schema object: %w", ErrInvalid)
	}
	if t, ok := m["type"]; ok && t != "object" {
		return nil, fmt.Errorf("parameters.type: must be \"object\": %w", ErrInvalid)
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, p); err != nil {
		return nil, fmt.Errorf("parameters: %w", ErrInvalid)
	}
	return buf.Bytes(), nil
}

func (r *registry) putTool(id uuid.UUID, create bool, in CustomToolInput, sealed *[]byte) (CustomTool, error) {
	now := r.clock.Now().UTC()
	var t customToolRec
	if create {
		t = customToolRec{ID: id, TimeoutSeconds: DefaultToolTimeout, Enabled: true, CreatedAt: now}
	} else {
		cur, ok := r.part.tools.rows[id]
		if !ok {
			return CustomTool{}, ErrNotFound
		}
		t = *cur
	}
	if in.Name != nil {
		t.Name = *in.Name
	}
	if in.Description != nil {
		t.Description = *in.Description
	}
	if in.Command != nil {
		t.Command = slices.Clone(in.Command)
	}
	if in.WorkingDir != nil {
		t.WorkingDir = *in.WorkingDir
	}
	if in.TimeoutSeconds != nil {
		t.TimeoutSeconds = *in.TimeoutSeconds
	}
	if in.Enabled != nil {
		t.Enabled = *in.Enabled
	}
	if in.AgentID != nil {
		t.AgentID = uuid.Nil
		if *in.AgentID != "" {
			a, ok := r.part.agents.get(*in.AgentID)
			if !ok {
				return CustomTool{}, fmt.Errorf("agent_id: agent %q: %w", *in.AgentID, ErrNotFound)
			}
			t.AgentID = a.ID
		}
	}
	if in.Parameters != nil || create {
		p, err := validSchema(in.Parameters)
		if err != nil {
			return CustomTool{}, err
		}
		t.Parameters = p
	}
	switch {
	case !toolNameRE.MatchString(t.Name):
		return CustomTool{}, fmt.Errorf("name: a lowercase slug (letters, digits, - and _, at most 64, starting with a letter): %w", ErrInvalid)
	case slices.Contains(BuiltinTools, t.Name):
		return CustomTool{}, fmt.Errorf("name: %q is a built-in tool: %w", t.Name, ErrInvalid)
	case len(t.Command) == 0 || t.Command[0] == "":
		return CustomTool{}, fmt.Errorf("command: required, an argv array such as [\"python3\", \"tool.py\"]: %w", ErrInvalid)
	case t.TimeoutSeconds < 1 || t.TimeoutSeconds > MaxToolTimeout:
		return CustomTool{}, fmt.Errorf("timeout_seconds: in 1..%d: %w", MaxToolTimeout, ErrInvalid)
	case t.WorkingDir != "" && (strings.HasPrefix(t.WorkingDir, "/") || slices.Contains(strings.Split(t.WorkingDir, "/"), "..")):
		return CustomTool{}, fmt.Errorf("working_dir: a relative path inside the agent's workspace: %w", ErrInvalid)
	}
	for _, a := range t.Command {
		if strings.ContainsRune(a, 0) {
			return CustomTool{}, fmt.Errorf("command: NUL in an argument: %w", ErrInvalid)
		}
	}
	if o, ok := r.part.tools.named(t.Name); ok && o.ID != t.ID {
		return CustomTool{}, fmt.Errorf("tool %q: %w", t.Name, ErrExists)
	}
	if sealed != nil {
		t.EnvSealed, t.EnvKeys = *sealed, keysOf(in.Env)
		if t.EnvKeys == nil {
			t.EnvSealed = nil
		}
	}
	t.UpdatedAt = now
	verb := verbOf(create)
	au := audit{action: "custom_tool." + verb, entityType: string(kindCustomTool), entityID: t.ID.String(),
		summary: fmt.Sprintf("%sd custom tool %q running %q", verb, t.Name, t.Command[0])}
	if err := r.commit(au, entitySaved{&t}); err != nil {
		return CustomTool{}, fmt.Errorf("log custom tool: %w", err)
	}
	return t.view(), nil
}

func (r regView) getTool(ref string) (CustomTool, error) {
	t, ok := r.part.tools.get(ref)
	if !ok {
		return CustomTool{}, ErrNotFound
	}
	return t.view(), nil
}

func (r *registry) delTool(ref string) error {
	t, ok := r.part.tools.get(ref)
	if !ok {
		return ErrNotFound
	}
	au := audit{action: "custom_tool.delete", entityType: string(kindCustomTool), entityID: t.ID.String(), summary: fmt.Sprintf("deleted custom tool %q", t.Name)}
	if err := r.commit(au, entityDeleted{kind: kindCustomTool, id: t.ID}); err != nil {
		return fmt.Errorf("log custom tool delete: %w", err)
	}
	return nil
}

// listTools lists the tools by name: agent's own (uuid.Nil: all), or with
// forAgent the ones agent runs with (its own and the global ones, enabled).
func (r regView) listTools(agent uuid.UUID, forAgent bool) []*customToolRec {
	var out []*customToolRec
	for _, t := range r.part.tools.rows {
		switch {
		case forAgent && (!t.Enabled || (t.AgentID != uuid.Nil && t.AgentID != agent)):
		case !forAgent && agent != uuid.Nil && t.AgentID != agent:
		default:
			out = append(out, t)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func (g *Gateway) sealEnv(id uuid.UUID, env map[string]string) (*[]byte, error) {
	if env == nil {
		return nil, nil
	}
	for k, v := range env {
		if !envNameRE.MatchString(k) || strings.ContainsRune(v, 0) {
			return nil, fmt.Errorf("env.%s: a variable name ([A-Za-z_][A-Za-z0-9_]*) and a value without NUL: %w", k, ErrInvalid)
		}
	}
	if len(env) == 0 {
		empty := []byte{}
		return &empty, nil
	}
	sealed, err := g.sealer.Seal(mustJSON(env), id[:])
	if err != nil {
		return nil, err
	}
	return &sealed, nil
}

// CreateCustomTool stores a new tool. ErrInvalid (naming the field),
// ErrExists, ErrNotFound (the agent).
func (g *Gateway) CreateCustomTool(ctx context.Context, in CustomToolInput) (CustomTool, error) {
	return g.toolCmd(ctx, g.newID(kindCustomTool), in, true)
}

// UpdateCustomTool changes the tool ref (id or name).
func (g *Gateway) UpdateCustomTool(ctx context.Context, ref string, in CustomToolInput) (CustomTool, error) {
	cur, err := g.GetCustomTool(ctx, ref)
	if err != nil {
		return CustomTool{}, err
	}
	return g.toolCmd(ctx, cur.ID, in, false)
}

func (g *Gateway) toolCmd(ctx context.Context, id uuid.UUID, in CustomToolInput, create bool) (CustomTool, error) {
	if !g.cfg.ToolsExecEnabled {
		return CustomTool{}, fmt.Errorf("custom tools run commands on the host: set tools.exec_enabled to allow them: %w", ErrDisabled)
	}
	sealed, err := g.sealEnv(id, in.Env)
	if err != nil {
		return CustomTool{}, err
	}
	return call(ctx, g, func(r *registry) (CustomTool, error) { return r.putTool(id, create, in, sealed) })
}

// GetCustomTool finds a tool by id or name; ErrNotFound.
func (g *Gateway) GetCustomTool(ctx context.Context, ref string) (CustomTool, error) {
	return read(ctx, g, func(r regView) (CustomTool, error) { return r.getTool(ref) })
}

// ListCustomTools lists the tools, by name; agent (uuid.Nil: all) keeps
// that agent's own tools only.
func (g *Gateway) ListCustomTools(ctx context.Context, agent uuid.UUID) ([]CustomTool, error) {
	recs, err := g.tools(ctx, agent, false)
	if err != nil {
		return nil, err
	}
	out := make([]CustomTool, len(recs))
	for i, t := range recs {
		out[i] = t.view()
	}
	return out, nil
}

// DeleteCustomTool removes a tool; ErrNotFound.
func (g *Gateway) DeleteCustomTool(ctx context.Context, ref string) error {
	return do(ctx, g, func(r *registry) error { return r.delTool(ref) })
}

// tools reads the tools by name (see registry.listTools).
func (g *Gateway) tools(ctx context.Context, agent uuid.UUID, forAgent bool) ([]*customToolRec, error) {
	return read(ctx, g, func(r regView) ([]*customToolRec, error) { return r.listTools(agent, forAgent), nil })
}

// RunnableTool is a custom tool with its env opened, to run it.
type RunnableTool struct {
	CustomTool
	Env map[string]string
}

// AgentCustomTools returns the enabled tools agent runs with (its own and
// the global ones), env opened.
func (g *Gateway) AgentCustomTools(ctx context.Context, agent uuid.UUID) ([]RunnableTool, error) {
	if !g.cfg.ToolsExecEnabled || g.cfg.WorkspaceDir == "" {
		return nil, nil
	}
	recs, err := g.tools(ctx, agent, true)
	if err != nil {
		return nil, err
	}
	return g.runnable(recs)
}

// runnable opens the env of each tool in recs.
func (g *Gateway) runnable(recs []*customToolRec) ([]RunnableTool, error) {
	out := make([]RunnableTool, 0, len(recs))
	for _, t := range recs {
		rt := RunnableTool{CustomTool: t.view(), Env: map[string]string{}}
		if err := g.openJSON(t.EnvSealed, t.ID, &rt.Env); err != nil {
			return nil, fmt.Errorf("custom tool %s env: %w", t.ID, err)
		}
		out = append(out, rt)
	}
	return out, nil
}

// WorkspaceOf is agent's workspace directory ("" without
// Config.WorkspaceDir).
func (g *Gateway) WorkspaceOf(agent uuid.UUID) string {
	if g.cfg.WorkspaceDir == "" {
		return ""
	}
	return g.cfg.WorkspaceDir + "/" + agent.String()
}
