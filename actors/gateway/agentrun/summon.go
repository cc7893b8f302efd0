package agentrun

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/google/uuid"

	"gatehouse/actors/gateway"
)

// Summoning and regenerating: an agent's provider writes the agent's
// own system prompt, in a turn like any other (traced, endpoints
// agents.summon and agents.regenerate) with the prompt below in place of
// the agent's.

// The prompts that have an agent's provider write its own system prompt.
const (
	summonPrompt = "You write the system prompt of an AI agent. The user gives the agent's description. " +
		"Answer with the system prompt only: addressed to the agent in the second person, concrete about its " +
		"role, tone and limits, at most 300 words."
	regeneratePrompt = "You maintain the system prompt of an AI agent. The user gives the current prompt and a " +
		"change request. Answer with the complete new system prompt only."
)

// Prompts is what summoning and regenerating need from the registry.
// Safe for concurrent use.
type Prompts interface {
	// GetAgent returns agent ref as user sees it; gateway.ErrNotFound for
	// a stranger's.
	GetAgent(ctx context.Context, user, ref string) (gateway.Agent, error)
	// UpdateAgent changes agent ref for user.
	UpdateAgent(ctx context.Context, user, ref string, in gateway.AgentInput) (gateway.Agent, error)
	// FinishSummon records a summon's outcome; gateway.ErrInUse when the
	// agent is no longer summoning.
	FinishSummon(ctx context.Context, id uuid.UUID, prompt, failure string) (gateway.Agent, error)
}

// emptyPrompt is the failure of a provider that answered with nothing.
const emptyPrompt = "the provider wrote an empty prompt"

// Summon starts agent a's summoning in the background, for user (its
// owner): its provider writes the system prompt from the description,
// then FinishSummon makes the agent active, or summon_failed with the
// failure in words. Close abandons it; the next start marks it failed.
func (rt *Runtime) Summon(a gateway.Agent, user string) {
	rt.bg.Add(1)
	go func() {
		defer rt.bg.Done()
		rt.summon(rt.bgCtx, a, user)
	}()
}

func (rt *Runtime) summon(ctx context.Context, a gateway.Agent, user string) {
	pr := rt.prompts
	p := gateway.Principal{User: user, Trusted: user == ""}
	prompt, err := rt.writePrompt(ctx, p, a.ID.String(), "agents.summon", summonPrompt, a.OtherConfig.Description)
	if ctx.Err() != nil {
		return // shutting down: the next start fails it
	}
	failure := ""
	switch {
	case err != nil:
		failure = rt.failureText(a, err)
	case prompt == "":
		failure = emptyPrompt
	}
	fctx, cancel := context.WithTimeout(ctx, recordTimeout)
	defer cancel()
	if _, err := pr.FinishSummon(fctx, a.ID, prompt, failure); err != nil && !errors.Is(err, gateway.ErrInUse) {
		rt.lg.Error("summon outcome not recorded", "agent", a.AgentKey, "err", err)
	}
}

// Regenerate has agent ref's provider rewrite its system prompt by
// request, stores the answer and returns the agent. p must be the
// agent's owner or an operator of it (gateway.ErrForbidden); a stranger
// gets gateway.ErrNotFound. ctx should carry no deadline shorter than
// the agent's limit. Errors: Turn's, a *ProviderError for an empty
// answer, the registry's.
func (rt *Runtime) Regenerate(ctx context.Context, p gateway.Principal, ref, request string) (gateway.Agent, error) {
	pr := rt.prompts
	a, err := pr.GetAgent(ctx, p.User, ref)
	switch {
	case err != nil:
		return gateway.Agent{}, fmt.Errorf("regenerate %q: %w", ref, err)
	case !p.MayManage(&a):
		return gateway.Agent{}, fmt.Errorf("regenerate %s: owner or operator only: %w", a.AgentKey, gateway.ErrForbidden)
	}
	msg := "Current system prompt:\n" + a.SystemPrompt + "\n\nChange request:\n" + request
	prompt, err := rt.writePrompt(ctx, p, a.ID.String(), "agents.regenerate", regeneratePrompt, msg)
	switch {
	case err != nil:
		return gateway.Agent{}, err
	case prompt == "":
		return gateway.Agent{}, &ProviderError{Detail: emptyPrompt}
	}
	a, err = pr.UpdateAgent(ctx, p.User, a.ID.String(), gateway.AgentInput{SystemPrompt: &prompt})
	if err != nil {
		return gateway.Agent{}, fmt.Errorf("store regenerated prompt: %w", err)
	}
	return a, nil
}

// writePrompt runs one turn of agent ref with system in place of its
// prompt and message as the user's; the answer, trimmed.
func (rt *Runtime) writePrompt(ctx context.Context, p gateway.Principal, ref, endpoint, system, message string) (string, error) {
	res, err := rt.Turn(ctx, p, TurnRequest{Agent: ref, Endpoint: endpoint, Channel: "internal", System: &system,
		AnyStatus: true, Messages: []Message{{Role: "user", Content: message}}})
	return strings.TrimSpace(res.Content), err
}

// failureText is a failed summon's summon_error: the failure in words,
// as the English error envelope says it (the registry keeps one text).
func (rt *Runtime) failureText(a gateway.Agent, err error) string {
	var te *TimeoutError
	var pe *ProviderError
	switch {
	case errors.As(err, &te):
		return fmt.Sprintf("the agent did not finish within its time limit of %d s", te.Seconds)
	case errors.As(err, &pe):
		return "the agent's provider failed: " + pe.Detail
	case errors.Is(err, ErrAgentNotFound):
		return "agent not found"
	case errors.Is(err, ErrAgentDisabled):
		return "the agent is disabled"
	case errors.Is(err, ErrProviderDisabled):
		return "the agent's provider is disabled"
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return "service temporarily unavailable"
	}
	rt.lg.Error("summon failed", "agent", a.AgentKey, "err", err)
	return "internal error"
}
