package gateway

import "fmt"

// Quotas cap what one user may hold, so that one tenant cannot exhaust the
// gateway's memory, disk or WAL for everyone (cmd: gateway.quotas). A
// change past a cap is ErrQuota, naming it; what is already held stays.
// Each cap is checked by the actor that owns the user's records, in the
// same turn as the write, so it holds under concurrent requests: agents,
// media and MCP requests by the registry, memory entries and sessions by
// the user's tenant shard.
type Quotas struct {
	// MemoryEntries is how many memory entries a user may keep
	// (memory_entries_per_user).
	MemoryEntries int
	// MediaBytes is how many bytes of media a user may keep
	// (media_bytes_per_user).
	MediaBytes int64
	// Sessions is how many sessions a user may keep (sessions_per_user).
	Sessions int
	// Agents is how many agents a user may own (agents_per_user).
	Agents int
	// PendingMCPRequests is how many MCP access requests of a user may
	// wait for review (mcp_requests_pending_per_user).
	PendingMCPRequests int
}

// DefaultQuotas: 10,000 memory entries, 1 GiB of media, 1,000 sessions,
// 100 agents and 20 pending MCP requests per user.
func DefaultQuotas() Quotas {
	return Quotas{MemoryEntries: 10_000, MediaBytes: 1 << 30, Sessions: 1_000, Agents: 100, PendingMCPRequests: 20}
}

// errQuota is ErrQuota naming the cap, its setting and its value.
func errQuota(what, setting string, limit int64) error {
	return fmt.Errorf("%s: at most %d per user (gateway.quotas.%s): %w", what, limit, setting, ErrQuota)
}
