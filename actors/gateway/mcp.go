package gateway

import (
	"context"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"sort"
	"time"

	"github.com/google/uuid"
)

// MCP servers, their grants and the access requests users make for them.
// A server's tools reach an agent's runs only through a grant to the
// agent or to the user the run is for; a grant may allow or deny tools
// by name. Header and env values are write-only (sealed, bound to the
// server id; only their names are shown).

// MCP transports.
const (
	MCPStdio      = "stdio"
	MCPStreamable = "streamable-http"
	MCPSSE        = "sse"
)

// MCPServer is a server as the API shows it.
type MCPServer struct {
	ID          uuid.UUID `json:"id"`
	Name        string    `json:"name"`
	DisplayName string    `json:"display_name"`
	Transport   string    `json:"transport"`
	Command     string    `json:"command"`
	Args        []string  `json:"args"`
	URL         string    `json:"url"`
	HeaderKeys  []string  `json:"header_keys"`
	EnvKeys     []string  `json:"env_keys"`
	ToolPrefix  string    `json:"tool_prefix"`
	TimeoutSec  int       `json:"timeout_sec"`
	Enabled     bool      `json:"enabled"`
	CreatedAt   time.Time `json:"created_at"`
	UpdatedAt   time.Time `json:"updated_at"`
}

// MCPServerInput creates or changes a server; nil fields keep their value,
// nil maps keep the secrets.
type MCPServerInput struct {
	Name        *string           `json:"name"`
	DisplayName *string           `json:"display_name"`
	Transport   *string           `json:"transport"`
	Command     *string           `json:"command"`
	Args        []string          `json:"args"`
	URL         *string           `json:"url"`
	Headers     map[string]string `json:"headers"`
	Env         map[string]string `json:"env"`
	ToolPrefix  *string           `json:"tool_prefix"`
	TimeoutSec  *int              `json:"timeout_sec"`
	Enabled     *bool             `json:"enabled"`
}

// MCPSecrets are a server's opened header and env values.
type MCPSecrets struct {
	Headers map[string]string `json:"headers,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
}

type mcpServerRec struct {
	ID          uuid.UUID `json:"id"`
	Name        string    `json:"name"`
	DisplayName string    `json:"display_name"`
	Transport   string    `json:"transport"`
	Command     string    `json:"command,omitempty"`
	Args        []string  `json:"args,omitempty"`
	URL         string    `json:"url,omitempty"`
	Sealed      []byte    `json:"secrets_sealed,omitempty"` // MCPSecrets
	HeaderKeys  []string  `json:"header_keys,omitempty"`
	EnvKeys     []string  `json:"env_keys,omitempty"`
	ToolPrefix  string    `json:"tool_prefix,omitempty"`
	TimeoutSec  int       `json:"timeout_sec"`
	Enabled     bool      `json:"enabled"`
	CreatedAt   time.Time `json:"created_at"`
	UpdatedAt   time.Time `json:"updated_at"`
}

func (s *mcpServerRec) ref() (kind, uuid.UUID) { return kindMCPServer, s.ID }

func (s *mcpServerRec) view() MCPServer {
	return MCPServer{ID: s.ID, Name: s.Name, DisplayName: s.DisplayName, Transport: s.Transport, Command: s.Command,
		Args: orEmpty(s.Args), URL: s.URL, HeaderKeys: orEmpty(s.HeaderKeys), EnvKeys: orEmpty(s.EnvKeys), ToolPrefix: s.ToolPrefix,
		TimeoutSec: s.TimeoutSec, Enabled: s.Enabled, CreatedAt: s.CreatedAt, UpdatedAt: s.UpdatedAt}
}

// MCPGrant lets an agent, or a user's runs, use a server's tools.
type MCPGrant struct {
	ID          uuid.UUID `json:"id"`
	ServerID    uuid.UUID `json:"server_id"`
	SubjectType string    `json:"subject_type"` // "agent" or "user"
	Subject     string    `json:"subject"`      // the agent's id, or the user id
	ToolAllow   []string  `json:"tool_allow"`   // empty: every tool
	ToolDeny    []string  `json:"tool_deny"`
	CreatedAt   time.Time `json:"created_at"`
}

// Grant subjects.
const (
	GrantAgent = "agent"
	GrantUser  = "user"
)

type mcpGrantRec MCPGrant

func (g *mcpGrantRec) ref() (kind, uuid.UUID) { return kindMCPGrant, g.ID }
func (g *mcpGrantRec) view() MCPGrant {
	v := MCPGrant(*g)
	v.ToolAllow, v.ToolDeny = orEmpty(v.ToolAllow), orEmpty(v.ToolDeny)
	return v
}

// Allows reports whether the grant lets tool through.
func (g MCPGrant) Allows(tool string) bool {
	return (len(g.ToolAllow) == 0 || slices.Contains(g.ToolAllow, tool)) && !slices.Contains(g.ToolDeny, tool)
}

var grantNS = uuid.MustParse("6f1d2c3b-4a59-4e6f-8a7b-9c0d1e2f3a4b")

// grantID is the one id of server's grant to subject: granting again
// replaces it.
func grantID(server uuid.UUID, typ, subject string) uuid.UUID {
	return uuid.NewSHA1(grantNS, []byte(server.String()+"\x00"+typ+"\x00"+subject))
}

// MCPRequest is a user's request for access to a server.
type MCPRequest struct {
	ID         uuid.UUID  `json:"id"`
	ServerID   uuid.UUID  `json:"server_id"`
	UserID     string     `json:"user_id"`
	AgentID    *uuid.UUID `json:"agent_id"` // for an agent; nil: for the user
	Reason     string     `json:"reason"`
	Status     string     `json:"status"` // pending, approved, denied
	Reviewer   string     `json:"reviewer,omitempty"`
	Note       string     `json:"note,omitempty"`
	GrantID    *uuid.UUID `json:"grant_id,omitempty"`
	CreatedAt  time.Time  `json:"created_at"`
	ReviewedAt *time.Time `json:"reviewed_at,omitempty"`
}

// Request statuses.
const (
	RequestPending  = "pending"
	RequestApproved = "approved"
	RequestDenied   = "denied"
)

type mcpRequestRec MCPRequest

func (r *mcpRequestRec) ref() (kind, uuid.UUID) { return kindMCPRequest, r.ID }
func (r *mcpRequestRec) view() MCPRequest       { return MCPRequest(*r) }

var headerNameRE = regexp.MustCompile(`^[A-Za-z0-9-]{1,128}$`)

func keysOf(m map[string]string) []string {
	if len(m) == 0 {
		return nil
	}
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func (r *registry) putMCP(id uuid.UUID, create bool, in MCPServerInput, sealed *[]byte, sec *MCPSecrets) (MCPServer, error) {
	now := r.clock.Now().UTC()
	var s mcpServerRec
	if create {
		s = mcpServerRec{ID: id, TimeoutSec: 60, Enabled: true, CreatedAt: now}
	} else {
		cur, ok := r.part.mcpServers.rows[id]
		if !ok {
			return MCPServer{}, ErrNotFound
		}
		s = *cur
	}
	set := func(dst *string, v *string) {
		if v != nil {
			*dst = *v
		}
	}
	set(&s.Name, in.Name)
	set(&s.DisplayName, in.DisplayName)
	set(&s.Transport, in.Transport)
	set(&s.Command, in.Command)
	set(&s.URL, in.URL)
	set(&s.ToolPrefix, in.ToolPrefix)
	if in.Args != nil {
		s.Args = slices.Clone(in.Args)
	}
	if in.TimeoutSec != nil {
		s.TimeoutSec = *in.TimeoutSec
	}
	if in.Enabled != nil {
		s.Enabled = *in.Enabled
	}
	if s.DisplayName == "" {
		s.DisplayName = s.Name
	}
	switch {
	case !channelNameRE.MatchString(s.Name):
		return MCPServer{}, fmt.Errorf("name: lowercase letters, digits, - and _, at most 64: %w", ErrInvalid)
	case s.ToolPrefix != "" && !toolNameRE.MatchString(s.ToolPrefix):
		return MCPServer{}, fmt.Errorf("tool_prefix: a lowercase slug: %w", ErrInvalid)
	case s.TimeoutSec < 1 || s.TimeoutSec > MaxToolTimeout:
		return MCPServer{}, fmt.Errorf("timeout_sec: in 1..%d: %w", MaxToolTimeout, ErrInvalid)
	}
	switch s.Transport {
	case MCPStdio:
		if s.Command == "" {
			return MCPServer{}, fmt.Errorf("command: required for the stdio transport: %w", ErrInvalid)
		}
		s.URL = ""
	case MCPStreamable, MCPSSE:
		u, err := url.Parse(s.URL)
		if s.URL == "" || err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
			return MCPServer{}, fmt.Errorf("url: an http(s) URL without credentials (put them in headers): %w", ErrInvalid)
		}
		s.Command, s.Args = "", nil
	default:
		return MCPServer{}, fmt.Errorf("transport: stdio, streamable-http or sse: %w", ErrInvalid)
	}
	if o, ok := r.part.mcpServers.named(s.Name); ok && o.ID != s.ID {
		return MCPServer{}, fmt.Errorf("mcp server %q: %w", s.Name, ErrExists)
	}
	if sealed != nil {
		s.Sealed, s.HeaderKeys, s.EnvKeys = *sealed, keysOf(sec.Headers), keysOf(sec.Env)
	}
	s.UpdatedAt = now
	verb := verbOf(create)
	au := audit{action: "mcp_server." + verb, entityType: string(kindMCPServer), entityID: s.ID.String(),
		summary: fmt.Sprintf("%sd MCP server %q (%s)", verb, s.Name, s.Transport)}
	if err := r.commit(au, entitySaved{&s}); err != nil {
		return MCPServer{}, fmt.Errorf("log mcp server: %w", err)
	}
	return s.view(), nil
}

func (r regView) getMCP(ref string) (*mcpServerRec, error) {
	s, ok := r.part.mcpServers.get(ref)
	if !ok {
		return nil, ErrNotFound
	}
	return s, nil
}

// listMCP lists the servers by name.
func (r regView) listMCP() []MCPServer {
	list := make([]MCPServer, 0, len(r.part.mcpServers.rows))
	for _, s := range r.part.mcpServers.rows {
		list = append(list, s.view())
	}
	sort.Slice(list, func(i, j int) bool { return list[i].Name < list[j].Name })
	return list
}

func (r *registry) delMCP(ref string) (uuid.UUID, error) {
	s, ok := r.part.mcpServers.get(ref)
	if !ok {
		return uuid.Nil, ErrNotFound
	}
	evs := []event{entityDeleted{kind: kindMCPServer, id: s.ID}}
	evs = r.part.mcpGrants.deletes(evs, func(g *mcpGrantRec) bool { return g.ServerID == s.ID })
	evs = r.part.mcpRequests.deletes(evs, func(q *mcpRequestRec) bool { return q.ServerID == s.ID })
	au := audit{action: "mcp_server.delete", entityType: string(kindMCPServer), entityID: s.ID.String(), summary: fmt.Sprintf("deleted MCP server %q with its grants and requests", s.Name)}
	if err := r.commit(au, evs...); err != nil {
		return uuid.Nil, fmt.Errorf("log mcp server delete: %w", err)
	}
	return s.ID, nil
}

// sealMCP seals a server's secrets (both maps; a nil map keeps the
// current values of that map).
func (g *Gateway) sealMCP(ctx context.Context, id uuid.UUID, in MCPServerInput, create bool) (*[]byte, *MCPSecrets, error) {
	if in.Headers == nil && in.Env == nil {
		return nil, nil, nil
	}
	sec := MCPSecrets{Headers: in.Headers, Env: in.Env}
	if !create && (in.Headers == nil || in.Env == nil) {
		_, cur, err := g.MCPServerSecrets(ctx, id.String())
		if err != nil {
			return nil, nil, err
		}
		if sec.Headers == nil {
			sec.Headers = cur.Headers
		}
		if sec.Env == nil {
			sec.Env = cur.Env
		}
	}
	for k := range sec.Headers {
		if !headerNameRE.MatchString(k) {
			return nil, nil, fmt.Errorf("headers.%s: a header name: %w", k, ErrInvalid)
		}
	}
	for k := range sec.Env {
		if !envNameRE.MatchString(k) {
			return nil, nil, fmt.Errorf("env.%s: a variable name: %w", k, ErrInvalid)
		}
	}
	sealed, err := g.sealer.Seal(mustJSON(sec), id[:])
	if err != nil {
		return nil, nil, err
	}
	return &sealed, &sec, nil
}

// CreateMCPServer registers a server. A stdio server runs a command on
// the host: ErrDisabled unless tools.exec_enabled.
func (g *Gateway) CreateMCPServer(ctx context.Context, in MCPServerInput) (MCPServer, error) {
	return g.mcpCmd(ctx, g.newID(kindMCPServer), in, true)
}

// UpdateMCPServer changes server ref (id or name).
func (g *Gateway) UpdateMCPServer(ctx context.Context, ref string, in MCPServerInput) (MCPServer, error) {
	cur, err := g.GetMCPServer(ctx, ref)
	if err != nil {
		return MCPServer{}, err
	}
	return g.mcpCmd(ctx, cur.ID, in, false)
}

func (g *Gateway) mcpCmd(ctx context.Context, id uuid.UUID, in MCPServerInput, create bool) (MCPServer, error) {
	if in.Transport != nil && *in.Transport == MCPStdio && !g.cfg.ToolsExecEnabled {
		return MCPServer{}, fmt.Errorf("a stdio MCP server runs a command on the host: set tools.exec_enabled to allow it: %w", ErrDisabled)
	}
	sealed, sec, err := g.sealMCP(ctx, id, in, create)
	if err != nil {
		return MCPServer{}, err
	}
	// A stdio server with exec off never runs (MCPAccessFor).
	return call(ctx, g, func(r *registry) (MCPServer, error) { return r.putMCP(id, create, in, sealed, sec) })
}

// GetMCPServer finds a server by id or name; ErrNotFound.
func (g *Gateway) GetMCPServer(ctx context.Context, ref string) (MCPServer, error) {
	s, err := g.mcpServer(ctx, ref)
	if err != nil {
		return MCPServer{}, err
	}
	return s.view(), nil
}

// mcpServer finds a server's record by id or name; ErrNotFound.
func (g *Gateway) mcpServer(ctx context.Context, ref string) (*mcpServerRec, error) {
	return read(ctx, g, func(r regView) (*mcpServerRec, error) { return r.getMCP(ref) })
}

// ListMCPServers lists the servers by name.
func (g *Gateway) ListMCPServers(ctx context.Context) ([]MCPServer, error) {
	return read(ctx, g, func(r regView) ([]MCPServer, error) { return r.listMCP(), nil })
}

// DeleteMCPServer removes a server with its grants and requests and
// returns its id; ErrNotFound.
func (g *Gateway) DeleteMCPServer(ctx context.Context, ref string) (uuid.UUID, error) {
	return call(ctx, g, func(r *registry) (uuid.UUID, error) { return r.delMCP(ref) })
}

// MCPServerSecrets returns a server with its secrets opened, to connect
// to it only.
func (g *Gateway) MCPServerSecrets(ctx context.Context, ref string) (MCPServer, MCPSecrets, error) {
	s, err := g.mcpServer(ctx, ref)
	if err != nil {
		return MCPServer{}, MCPSecrets{}, err
	}
	sec, err := g.openMCP(s)
	return s.view(), sec, err
}

// openMCP opens a server's sealed headers and env. A server whose secrets
// cannot be opened (another master key) is an error, never a connection
// made without its credentials.
func (g *Gateway) openMCP(s *mcpServerRec) (MCPSecrets, error) {
	var sec MCPSecrets
	if err := g.openJSON(s.Sealed, s.ID, &sec); err != nil {
		return MCPSecrets{}, fmt.Errorf("mcp server %s: open its headers and env: %w", s.Name, err)
	}
	return sec, nil
}

// MCPAccess is a granted server, its secrets opened, and the grants that
// let a run use it.
type MCPAccess struct {
	Server  MCPServer
	Secrets MCPSecrets
	Grants  []MCPGrant
}

type accessRow struct {
	rec    *mcpServerRec
	grants []MCPGrant
}

func (r regView) accessMCP(agent uuid.UUID, user string) []accessRow {
	by := map[uuid.UUID]*accessRow{}
	for _, g := range r.part.mcpGrants.rows {
		if (g.SubjectType == GrantAgent && g.Subject == agent.String()) || (g.SubjectType == GrantUser && user != "" && g.Subject == user) {
			s, ok := r.part.mcpServers.rows[g.ServerID]
			if !ok || !s.Enabled {
				continue
			}
			row := by[s.ID]
			if row == nil {
				row = &accessRow{rec: s}
				by[s.ID] = row
			}
			row.grants = append(row.grants, g.view())
		}
	}
	out := make([]accessRow, 0, len(by))
	for _, row := range by {
		out = append(out, *row)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].rec.Name < out[j].rec.Name })
	return out
}

// MCPAccessFor lists the enabled servers a run of agent for user may use
// (a grant to the agent or to the user), secrets opened. Stdio servers
// are left out unless tools.exec_enabled.
func (g *Gateway) MCPAccessFor(ctx context.Context, agent uuid.UUID, user string) ([]MCPAccess, error) {
	rows, err := read(ctx, g, func(r regView) ([]accessRow, error) { return r.accessMCP(agent, user), nil })
	if err != nil {
		return nil, err
	}
	return g.openAccess(rows)
}

// openAccess opens the secrets of the servers rows grant, leaving out
// the stdio ones while tool execution is off.
func (g *Gateway) openAccess(rows []accessRow) ([]MCPAccess, error) {
	out := make([]MCPAccess, 0, len(rows))
	for _, row := range rows {
		if row.rec.Transport == MCPStdio && !g.cfg.ToolsExecEnabled {
			continue
		}
		sec, err := g.openMCP(row.rec)
		if err != nil {
			return nil, err
		}
		out = append(out, MCPAccess{Server: row.rec.view(), Secrets: sec, Grants: row.grants})
	}
	return out, nil
}

// MCPWorkspace is a stdio server's working directory.
func (g *Gateway) MCPWorkspace(server uuid.UUID) string {
	if g.cfg.WorkspaceDir == "" {
		return ""
	}
	return g.cfg.WorkspaceDir + "/mcp-" + server.String()
}

// MCPCache is the npm cache every stdio server shares (what `npx` fetches
// is downloaded once, not once per server); "" without a workspace dir.
func (g *Gateway) MCPCache() string {
	if g.cfg.WorkspaceDir == "" {
		return ""
	}
	return g.cfg.WorkspaceDir + "/mcp-npm-cache"
}

// Grants and requests.

func (r *registry) putGrant(server string, g MCPGrant, agentRef string) (MCPGrant, error) {
	s, ok := r.part.mcpServers.get(server)
	if !ok {
		return MCPGrant{}, fmt.Errorf("mcp server %q: %w", server, ErrNotFound)
	}
	if g.SubjectType == GrantAgent {
		a, ok := r.part.agents.get(agentRef)
		if !ok {
			return MCPGrant{}, fmt.Errorf("agent_id: agent %q: %w", agentRef, ErrNotFound)
		}
		g.Subject = a.ID.String()
	}
	g.ServerID, g.ID, g.CreatedAt = s.ID, grantID(s.ID, g.SubjectType, g.Subject), r.clock.Now().UTC()
	rec := mcpGrantRec(g)
	au := audit{action: "mcp_grant.create", entityType: string(kindMCPServer), entityID: s.ID.String(),
		summary: fmt.Sprintf("granted MCP server %q to %s %s", s.Name, g.SubjectType, g.Subject)}
	if err := r.commit(au, entitySaved{&rec}); err != nil {
		return MCPGrant{}, fmt.Errorf("log grant: %w", err)
	}
	return rec.view(), nil
}

func (r *registry) delGrant(server, typ, subject string) error {
	s, ok := r.part.mcpServers.get(server)
	if !ok {
		return ErrNotFound
	}
	if typ == GrantAgent {
		if a, ok := r.part.agents.get(subject); ok {
			subject = a.ID.String()
		}
	}
	id := grantID(s.ID, typ, subject)
	if _, ok := r.part.mcpGrants.rows[id]; !ok {
		return ErrNotFound
	}
	au := audit{action: "mcp_grant.delete", entityType: string(kindMCPServer), entityID: s.ID.String(),
		summary: fmt.Sprintf("revoked MCP server %q from %s %s", s.Name, typ, subject)}
	if err := r.commit(au, entityDeleted{kind: kindMCPGrant, id: id}); err != nil {
		return fmt.Errorf("log grant delete: %w", err)
	}
	return nil
}

func (r regView) listGrants(agentRef string) ([]MCPGrant, error) {
	a, ok := r.part.agents.get(agentRef)
	if !ok {
		return nil, ErrNotFound
	}
	var out []MCPGrant
	for _, g := range r.part.mcpGrants.rows {
		if g.SubjectType == GrantAgent && g.Subject == a.ID.String() {
			out = append(out, g.view())
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ServerID.String() < out[j].ServerID.String() })
	return out, nil
}

// GrantMCP grants server ref to an agent (agentRef) or a user. Granting
// again replaces the grant's filters.
func (g *Gateway) GrantMCP(ctx context.Context, server, subjectType, subject string, allow, deny []string) (MCPGrant, error) {
	gr := MCPGrant{SubjectType: subjectType, Subject: subject, ToolAllow: slices.Clone(allow), ToolDeny: slices.Clone(deny)}
	switch {
	case subjectType == GrantUser && !ValidUserID(subject):
		return MCPGrant{}, fmt.Errorf("user_id: required: %w", ErrInvalid)
	case subjectType == GrantAgent && subject == "":
		return MCPGrant{}, fmt.Errorf("agent_id: required: %w", ErrInvalid)
	case subjectType != GrantUser && subjectType != GrantAgent:
		return MCPGrant{}, fmt.Errorf("subject: agent or user: %w", ErrInvalid)
	}
	return call(ctx, g, func(r *registry) (MCPGrant, error) { return r.putGrant(server, gr, subject) })
}

// RevokeMCP removes a grant; ErrNotFound.
func (g *Gateway) RevokeMCP(ctx context.Context, server, subjectType, subject string) error {
	return do(ctx, g, func(r *registry) error { return r.delGrant(server, subjectType, subject) })
}

// AgentMCPGrants lists the grants to agent ref; ErrNotFound.
func (g *Gateway) AgentMCPGrants(ctx context.Context, agentRef string) ([]MCPGrant, error) {
	return read(ctx, g, func(r regView) ([]MCPGrant, error) { return r.listGrants(agentRef) })
}

func (r *registry) putRequest(q mcpRequestRec, server, agentRef string) (MCPRequest, error) {
	s, ok := r.part.mcpServers.get(server)
	if !ok {
		return MCPRequest{}, fmt.Errorf("server_id: mcp server %q: %w", server, ErrNotFound)
	}
	pending := 0
	for _, o := range r.part.mcpRequests.rows {
		if o.UserID == q.UserID && o.Status == RequestPending {
			pending++
		}
	}
	if pending >= r.quota.PendingMCPRequests {
		return MCPRequest{}, errQuota("pending MCP access requests", "mcp_requests_pending_per_user", int64(r.quota.PendingMCPRequests))
	}
	q.ServerID, q.Status, q.CreatedAt = s.ID, RequestPending, r.clock.Now().UTC()
	if agentRef != "" {
		a, ok := r.part.agents.get(agentRef)
		if !ok || !a.canUse(q.UserID) {
			return MCPRequest{}, fmt.Errorf("agent_id: agent %q: %w", agentRef, ErrNotFound)
		}
		id := a.ID
		q.AgentID = &id
	}
	au := audit{action: "mcp_request.create", entityType: string(kindMCPRequest), entityID: q.ID.String(),
		summary: fmt.Sprintf("%s asked for MCP server %q", q.UserID, s.Name)}
	if err := r.commit(au, entitySaved{&q}); err != nil {
		return MCPRequest{}, fmt.Errorf("log request: %w", err)
	}
	return q.view(), nil
}

func (r regView) listRequests(status, user string) []MCPRequest {
	var out []MCPRequest
	for _, q := range r.part.mcpRequests.rows {
		if (status == "" || q.Status == status) && (user == "" || q.UserID == user) {
			out = append(out, q.view())
		}
	}
	sort.Slice(out, func(i, j int) bool { return cmpUUID(out[i].ID, out[j].ID) > 0 })
	return out
}

// reviewRequest approves (creating the grant in the same write) or denies
// a pending request; a request already reviewed is ErrInUse.
func (r *registry) reviewRequest(id uuid.UUID, approved bool, note, reviewer string) (MCPRequest, error) {
	q, ok := r.part.mcpRequests.rows[id]
	switch {
	case !ok:
		return MCPRequest{}, ErrNotFound
	case q.Status != RequestPending:
		return MCPRequest{}, fmt.Errorf("request %s was %s already: %w", q.ID, q.Status, ErrInUse)
	}
	next := *q
	now := r.clock.Now().UTC()
	next.Status, next.Reviewer, next.Note, next.ReviewedAt = RequestDenied, reviewer, note, &now
	evs := []event{}
	if approved {
		next.Status = RequestApproved
		typ, subject := GrantUser, q.UserID
		if q.AgentID != nil {
			typ, subject = GrantAgent, q.AgentID.String()
		}
		g := mcpGrantRec{ID: grantID(q.ServerID, typ, subject), ServerID: q.ServerID, SubjectType: typ, Subject: subject, CreatedAt: now}
		next.GrantID = &g.ID
		// Approval never widens an existing grant: an admin's allow and
		// deny lists stay as they are.
		if _, exists := r.part.mcpGrants.rows[g.ID]; !exists {
			evs = append(evs, entitySaved{&g})
		}
	}
	evs = append([]event{entitySaved{&next}}, evs...)
	au := audit{action: "mcp_request.review", entityType: string(kindMCPRequest), entityID: q.ID.String(),
		summary: fmt.Sprintf("%s the request of %s", next.Status, q.UserID)}
	if err := r.commit(au, evs...); err != nil {
		return MCPRequest{}, fmt.Errorf("log review: %w", err)
	}
	return next.view(), nil
}

// RequestMCP files user's request for server ref, for agentRef (one they
// may use) or, when it is "", for themselves.
func (g *Gateway) RequestMCP(ctx context.Context, user, server, agentRef, reason string) (MCPRequest, error) {
	if !ValidUserID(user) {
		return MCPRequest{}, fmt.Errorf("a request needs a user: %w", ErrInvalid)
	}
	id, err := uuid.NewV7()
	if err != nil {
		return MCPRequest{}, err
	}
	q := mcpRequestRec{ID: id, UserID: user, Reason: truncateText(reason, 1000)}
	return call(ctx, g, func(r *registry) (MCPRequest, error) { return r.putRequest(q, server, agentRef) })
}

// MCPRequests lists requests by status ("" any) and user ("" any),
// newest first.
func (g *Gateway) MCPRequests(ctx context.Context, status, user string) ([]MCPRequest, error) {
	return read(ctx, g, func(r regView) ([]MCPRequest, error) { return r.listRequests(status, user), nil })
}

// ReviewMCP approves or denies a pending request; ErrNotFound, ErrInUse
// (reviewed already).
func (g *Gateway) ReviewMCP(ctx context.Context, id uuid.UUID, approved bool, note, reviewer string) (MCPRequest, error) {
	note = truncateText(note, 1000)
	return call(ctx, g, func(r *registry) (MCPRequest, error) { return r.reviewRequest(id, approved, note, reviewer) })
}
