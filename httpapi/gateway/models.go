package gateway

import (
	"context"

	"gatehouse/actors/gateway"
)

// modelView is an agent as an OpenAI model: what OpenAI clients and tools
// that list models expect.
type modelView struct {
	ID      string `json:"id"` // gateway:<agent_key>
	Object  string `json:"object"`
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
}

type modelList struct {
	Object string      `json:"object"`
	Data   []modelView `json:"data"`
}

// listModels lists the active agents the caller may run: the user's own
// and those shared with them; every agent for a trusted backend acting
// for nobody; none for a key bound to no user.
func (s *Server) listModels(ctx context.Context, c Caller, _ None) (modelList, error) {
	out := modelList{Object: "list", Data: []modelView{}}
	if c.UserID == "" && !c.Trusted() {
		return out, nil
	}
	as, err := s.d.Agents.ListAgents(ctx, c.principal().AgentReader())
	if err != nil {
		return out, err
	}
	for _, a := range as {
		if a.Status != gateway.AgentActive {
			continue
		}
		out.Data = append(out.Data, modelView{ID: "gateway:" + a.AgentKey, Object: "model", Created: a.CreatedAt.Unix(), OwnedBy: a.OwnerID})
	}
	return out, nil
}
