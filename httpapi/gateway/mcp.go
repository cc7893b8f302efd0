package gateway

import (
	"context"

	"github.com/google/uuid"

	"gatehouse/actors/gateway"
	"gatehouse/actors/gateway/mcppool"
)

// MCPStore is what MCP servers, grants and requests need from the
// gateway. Safe for concurrent use.
type MCPStore interface {
	CreateMCPServer(ctx context.Context, in gateway.MCPServerInput) (gateway.MCPServer, error)
	UpdateMCPServer(ctx context.Context, ref string, in gateway.MCPServerInput) (gateway.MCPServer, error)
	GetMCPServer(ctx context.Context, ref string) (gateway.MCPServer, error)
	ListMCPServers(ctx context.Context) ([]gateway.MCPServer, error)
	DeleteMCPServer(ctx context.Context, ref string) (uuid.UUID, error)
	GrantMCP(ctx context.Context, server, subjectType, subject string, allow, deny []string) (gateway.MCPGrant, error)
	RevokeMCP(ctx context.Context, server, subjectType, subject string) error
	AgentMCPGrants(ctx context.Context, agentRef string) ([]gateway.MCPGrant, error)
	RequestMCP(ctx context.Context, user, server, agentRef, reason string) (gateway.MCPRequest, error)
	MCPRequests(ctx context.Context, status, user string) ([]gateway.MCPRequest, error)
	ReviewMCP(ctx context.Context, id uuid.UUID, approved bool, note, reviewer string) (gateway.MCPRequest, error)
}

// MCPLive is the live side of MCP servers: their connections.
type MCPLive interface {
	// Status connects to server ref if needed and reports its state and
	// tools.
	Status(ctx context.Context, ref string) (mcppool.Status, error)
	// Starting names the MCP servers agent's runs for user may use that
	// are being connected right now (their tools are not listed yet).
	Starting(ctx context.Context, agent uuid.UUID, user string) ([]string, error)
	// Peek reports server id's connection as it is now, without
	// connecting or waiting.
	Peek(id uuid.UUID) mcppool.Status
	// Forget closes server id's connection (changed or deleted).
	Forget(id uuid.UUID)
}

var _ MCPStore = (*gateway.Gateway)(nil)

type mcpList struct {
	Data []mcpView `json:"data"`
}

// listMCP lists the servers with their connections as they are now
// (connected, starting, the last error), connecting to none.
func (s *Server) listMCP(ctx context.Context, c Caller, _ None) (mcpList, error) {
	l, err := s.d.MCP.ListMCPServers(ctx)
	if err != nil {
		return mcpList{}, err
	}
	out := mcpList{Data: make([]mcpView, 0, len(l))}
	for _, srv := range shownAll(c, l) {
		st := s.d.MCPLive.Peek(srv.ID)
		if !srv.Enabled {
			st = mcppool.Status{Error: "disabled", Tools: []mcppool.Tool{}}
		}
		if !c.Trusted() && st.Error != "" && st.Error != "disabled" { // it names the URL or the command
			st.Error = "unavailable"
		}
		out.Data = append(out.Data, mcpView{MCPServer: srv, Status: st})
	}
	return out, nil
}

type mcpCreateIn struct {
	gateway.MCPServerInput
}

func (s *Server) createMCP(ctx context.Context, _ Caller, in mcpCreateIn) (gateway.MCPServer, error) {
	return s.d.MCP.CreateMCPServer(ctx, in.MCPServerInput)
}

// mcpView is a server with its live status and tools.
type mcpView struct {
	gateway.MCPServer
	Status mcppool.Status `json:"status"`
}

func (s *Server) getMCP(ctx context.Context, c Caller, in idIn) (mcpView, error) {
	srv, err := s.d.MCP.GetMCPServer(ctx, in.ID)
	if err != nil {
		return mcpView{}, err
	}
	st, err := s.d.MCPLive.Status(ctx, srv.ID.String())
	if err != nil {
		return mcpView{}, err
	}
	if !c.Trusted() && st.Error != "" { // it names the URL or the command
		st.Error = "unavailable"
	}
	return mcpView{MCPServer: shown(c, srv), Status: st}, nil
}

type mcpUpdateIn struct {
	ID string `path:"id" json:"-"`
	gateway.MCPServerInput
}

func (s *Server) updateMCP(ctx context.Context, _ Caller, in mcpUpdateIn) (gateway.MCPServer, error) {
	srv, err := s.d.MCP.UpdateMCPServer(ctx, in.ID, in.MCPServerInput)
	if err != nil {
		return srv, err
	}
	s.d.MCPLive.Forget(srv.ID)
	return srv, nil
}

func (s *Server) deleteMCP(ctx context.Context, _ Caller, in idIn) (None, error) {
	id, err := s.d.MCP.DeleteMCPServer(ctx, in.ID)
	if err != nil {
		return None{}, err
	}
	s.d.MCPLive.Forget(id)
	return None{}, nil
}

type grantAgentIn struct {
	ID        string   `path:"id" json:"-"`
	AgentID   string   `json:"agent_id"`
	ToolAllow []string `json:"tool_allow"`
	ToolDeny  []string `json:"tool_deny"`
}

type grantUserIn struct {
	ID        string   `path:"id" json:"-"`
	UserID    string   `json:"user_id"`
	ToolAllow []string `json:"tool_allow"`
	ToolDeny  []string `json:"tool_deny"`
}

func (s *Server) grantAgent(ctx context.Context, _ Caller, in grantAgentIn) (gateway.MCPGrant, error) {
	return s.d.MCP.GrantMCP(ctx, in.ID, gateway.GrantAgent, in.AgentID, in.ToolAllow, in.ToolDeny)
}

func (s *Server) grantUser(ctx context.Context, _ Caller, in grantUserIn) (gateway.MCPGrant, error) {
	return s.d.MCP.GrantMCP(ctx, in.ID, gateway.GrantUser, in.UserID, in.ToolAllow, in.ToolDeny)
}

type revokeAgentIn struct {
	ID      string `path:"id" json:"-"`
	AgentID string `path:"agentID" json:"-"`
}

type revokeUserIn struct {
	ID     string `path:"id" json:"-"`
	UserID string `path:"userID" json:"-"`
}

func (s *Server) revokeAgent(ctx context.Context, _ Caller, in revokeAgentIn) (None, error) {
	return None{}, s.d.MCP.RevokeMCP(ctx, in.ID, gateway.GrantAgent, in.AgentID)
}

func (s *Server) revokeUser(ctx context.Context, _ Caller, in revokeUserIn) (None, error) {
	return None{}, s.d.MCP.RevokeMCP(ctx, in.ID, gateway.GrantUser, in.UserID)
}

type agentGrantsIn struct {
	AgentID string `path:"agentID" json:"-"`
}

type grantList struct {
	Data []gateway.MCPGrant `json:"data"`
}

func (s *Server) agentGrants(ctx context.Context, c Caller, in agentGrantsIn) (grantList, error) {
	if _, err := s.visibleAgent(ctx, c, in.AgentID); err != nil { // a stranger's agent: 404
		return grantList{}, err
	}
	gs, err := s.d.MCP.AgentMCPGrants(ctx, in.AgentID)
	return grantList{Data: nonNil(gs)}, resource(err, errAgentNotFound, nil)
}

type requestIn struct {
	ServerID string `json:"server_id"`
	AgentID  string `json:"agent_id"`
	Reason   string `json:"reason"`
}

// createRequest: the caller's user asks for a server, for an agent they
// may use or for themselves.
func (s *Server) createRequest(ctx context.Context, c Caller, in requestIn) (gateway.MCPRequest, error) {
	if in.ServerID == "" {
		return gateway.MCPRequest{}, errInvalid("server_id: required")
	}
	return s.d.MCP.RequestMCP(ctx, c.UserID, in.ServerID, in.AgentID, in.Reason)
}

type requestsIn struct {
	Status string `query:"status" json:"-"`
	UserID string `query:"user_id" json:"-"`
}

type requestList struct {
	Data []gateway.MCPRequest `json:"data"`
}

// listRequests: pending by default (status=all for every one); a
// non-admin caller sees their own user's requests and their outcome.
func (s *Server) listRequests(ctx context.Context, c Caller, in requestsIn) (requestList, error) {
	switch in.Status {
	case "":
		in.Status = gateway.RequestPending
	case "all":
		in.Status = ""
	case gateway.RequestPending, gateway.RequestApproved, gateway.RequestDenied:
	default:
		return requestList{}, errInvalid("status: pending, approved, denied or all")
	}
	user, err := ownUser(c, in.UserID)
	if err != nil {
		return requestList{}, err
	}
	rs, err := s.d.MCP.MCPRequests(ctx, in.Status, user)
	return requestList{Data: nonNil(rs)}, err
}

type reviewIn struct {
	ID       string `path:"id" json:"-"`
	Approved *bool  `json:"approved"`
	Note     string `json:"note"`
}

func (s *Server) reviewRequest(ctx context.Context, c Caller, in reviewIn) (gateway.MCPRequest, error) {
	id, err := uuid.Parse(in.ID)
	if err != nil {
		return gateway.MCPRequest{}, errNotFound
	}
	if in.Approved == nil {
		return gateway.MCPRequest{}, errInvalid("approved: required (true or false)")
	}
	reviewer := "gateway_token"
	if c.KeyID != uuid.Nil {
		reviewer = c.KeyID.String()
	}
	return s.d.MCP.ReviewMCP(ctx, id, *in.Approved, in.Note, reviewer)
}
