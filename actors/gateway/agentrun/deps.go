package agentrun

import (
	"errors"
	"log/slog"
	"time"
)

// Deps are a Runtime's collaborators: in production the gateway for all
// but Toolbox and TurnLock (see package app). The required ones say so;
// New refuses Deps without them. Every other one is optional, nil
// leaving out what it provides, as its comment says.
type Deps struct {
	// Agents plans each run from one view of the registry (required).
	Agents Agents
	// Recorder takes the record of every finished run (required).
	Recorder Recorder
	// Sessions serializes and records the turns of sessions (required).
	Sessions Sessions
	// Prompts records summoning's and regenerating's prompts (required).
	Prompts Prompts
	// Now dates the runs (required): the gateway's clock. Durations are
	// measured on the machine's monotonic clock.
	Now func() time.Time

	// Logger takes the runtime's logs; nil discards them.
	Logger *slog.Logger
	// Memory, Delegations and Skills are the stores of the built-in
	// tools: memory_search and memory_save, delegate, skill_read (and the
	// skills' system message). nil leaves that built-in out.
	Memory      Memory
	Delegations Delegations
	Skills      Skills
	// Toolbox makes the custom and MCP tools a run's plan names runnable;
	// nil: the built-ins only, and no tools are planned.
	Toolbox Toolbox
	// TurnLock serializes a session's turns across a cluster's nodes; nil
	// on one node, where the session's tenant shard does.
	TurnLock TurnLock
	// Budgets enforces budgets on every provider call, at Prices (nil:
	// every call costs 0 USD; token caps still hold); with
	// RequireKnownPrices (pricing.require_known), a call to a model
	// without a price is refused. nil Budgets: none enforced.
	Budgets            Budgets
	Prices             Prices
	RequireKnownPrices bool
}

// Validate names the first required collaborator missing.
func (d Deps) Validate() error {
	switch {
	case d.Agents == nil:
		return errors.New("agentrun: Deps.Agents is required")
	case d.Recorder == nil:
		return errors.New("agentrun: Deps.Recorder is required")
	case d.Sessions == nil:
		return errors.New("agentrun: Deps.Sessions is required")
	case d.Prompts == nil:
		return errors.New("agentrun: Deps.Prompts is required")
	case d.Now == nil:
		return errors.New("agentrun: Deps.Now is required")
	}
	return nil
}
