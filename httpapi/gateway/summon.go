package gateway

import (
	"context"
	"errors"
	"strings"

	"gatehouse/actors/gateway"
	"gatehouse/actors/gateway/runtime"
)

// The prompts that have an agent's provider write its own system prompt.
const (
	summonPrompt = "You write the system prompt of an AI agent. The user gives the agent's description. " +
		"Answer with the system prompt only: addressed to the agent in the second person, concrete about its " +
		"role, tone and limits, at most 300 words."
	regeneratePrompt = "You maintain the system prompt of an AI agent. The user gives the current prompt and a " +
		"change request. Answer with the complete new system prompt only."
)

// regenerateIn is POST /v1/agents/{id}/regenerate.
type regenerateIn struct {
	ID string `path:"id" json:"-"`
	// Prompt says how to change the agent's configuration.
	Prompt string `json:"prompt"`
}

// summon runs agent a's summoning in the background: its provider writes
// the system prompt from the description, then FinishSummon records the
// outcome. A shutdown abandons it; the next start marks it summon_failed.
func (s *Server) summon(a gateway.Agent, user string) {
	s.bg.Add(1)
	go func() {
		defer s.bg.Done()
		prompt, err := s.runOnce(s.bgCtx, a.ID.String(), user, "agents.summon", summonPrompt, a.OtherConfig.Description)
		if s.bgCtx.Err() != nil {
			return
		}
		failure := ""
		switch {
		case err != nil:
			e, _ := classify(err)
			failure = detail(e, langEN).Message
		case prompt == "":
			failure = "the provider wrote an empty prompt"
		}
		ctx, cancel := context.WithTimeout(s.bgCtx, s.cfg.RequestTimeout)
		defer cancel()
		if _, err := s.d.Agents.FinishSummon(ctx, a.ID, prompt, failure); err != nil && !errors.Is(err, gateway.ErrInUse) {
			s.lg.Error("summon outcome not recorded", "agent", a.AgentKey, "err", err)
		}
	}()
}

// runOnce runs agent ref once with system in place of its prompt and one
// user message; the run is traced like any other.
func (s *Server) runOnce(ctx context.Context, ref, user, endpoint, system, message string) (string, error) {
	rn, err := s.d.Runner.Prepare(ctx, runtime.Request{
		Agent: ref, User: user, Endpoint: endpoint, Channel: "internal", System: &system, AnyStatus: true,
		Messages: []runtime.Message{{Role: "user", Content: message}},
	})
	if err != nil {
		return "", err
	}
	res, err := s.d.Runner.Execute(ctx, rn, nil)
	return strings.TrimSpace(res.Content), err
}

func (s *Server) resummon(ctx context.Context, c Caller, in idIn) (gateway.Agent, error) {
	a, err := s.d.Agents.Resummon(ctx, c.UserID, in.ID)
	if err != nil {
		return gateway.Agent{}, resource(err, errAgentNotFound, nil)
	}
	s.summon(a, c.UserID)
	return a, nil
}

func (s *Server) regenerate(ctx context.Context, c Caller, in regenerateIn) (gateway.Agent, error) {
	if strings.TrimSpace(in.Prompt) == "" {
		return gateway.Agent{}, errInvalid("prompt must not be empty")
	}
	a, err := s.d.Agents.GetAgent(ctx, c.UserID, in.ID)
	if err != nil {
		return gateway.Agent{}, resource(err, errAgentNotFound, nil)
	}
	if a.OwnerID != c.UserID && !isOperator(a, c.UserID) {
		return gateway.Agent{}, errOwnerOnly
	}
	msg := "Current system prompt:\n" + a.SystemPrompt + "\n\nChange request:\n" + in.Prompt
	prompt, err := s.runOnce(runContext(ctx), a.ID.String(), c.UserID, "agents.regenerate", regeneratePrompt, msg)
	switch {
	case err != nil:
		return gateway.Agent{}, err
	case prompt == "":
		return gateway.Agent{}, &runtime.ProviderError{Detail: "the provider wrote an empty prompt"}
	}
	a, err = s.d.Agents.UpdateAgent(ctx, c.UserID, a.ID.String(), gateway.AgentInput{SystemPrompt: &prompt})
	if err != nil {
		return gateway.Agent{}, resource(err, errAgentNotFound, nil)
	}
	return a, nil
}

func isOperator(a gateway.Agent, user string) bool {
	for _, sh := range a.Shares {
		if sh.UserID == user && sh.Role == gateway.ShareOperator {
			return true
		}
	}
	return false
}
