package gateway

import (
	"github.com/valyala/fasthttp"

	"gatehouse/actors/gateway"
)

// table declares every route the gateway serves, one line each (see
// Route and op). Its order is the order of the docs.
func (s *Server) table() []Route {
	const get, post, put, del = fasthttp.MethodGet, fasthttp.MethodPost, fasthttp.MethodPut, fasthttp.MethodDelete
	const read, write, admin = gateway.ScopeRead, gateway.ScopeWrite, gateway.ScopeAdmin
	const created, noContent = fasthttp.StatusCreated, fasthttp.StatusNoContent
	return []Route{
		{Method: get, Path: "/health", RPC: "health", Public: true, Tag: "system", Summary: "Liveness probe (no authentication)", Op: op(s.health)},
		{Method: get, Path: "/metrics", RPC: "metrics", Scope: read, Tag: "system", Summary: "Prometheus metrics", Content: "text/plain", Op: op(s.metrics)},
		{Method: get, Path: "/docs", RPC: rpcDocsPage, Scope: read, QueryToken: true, Tag: "docs", Summary: "Interactive API documentation (OpenAPI viewer)", Content: "text/html", Op: op(s.docsPage)},
		{Method: get, Path: "/docs/openapi.json", RPC: "docs.openapi", Scope: read, QueryToken: true, Tag: "docs", Summary: "This OpenAPI 3.1 document", Content: "application/json", Op: op(s.docsSpec)},
		{Method: get, Path: "/docs/assets/{file}", RPC: "docs.asset", Scope: read, QueryToken: true, Tag: "docs", Summary: "A file of the bundled viewer", Content: "application/octet-stream", Op: op(s.docsAsset)},

		{Method: get, Path: "/v1/api-keys", RPC: "api_keys.list", Scope: admin, Tag: "api-keys", Summary: "List API keys (masked)", Op: op(s.listAPIKeys)},
		{Method: post, Path: "/v1/api-keys", RPC: "api_keys.create", Scope: admin, Tag: "api-keys", Summary: "Create an API key; the raw key is returned once", Status: created, NoStore: true, Op: op(s.createAPIKey)},
		{Method: del, Path: "/v1/api-keys/{id}", RPC: "api_keys.revoke", Scope: admin, Tag: "api-keys", Summary: "Revoke an API key at once", Status: noContent, Op: op(s.revokeAPIKey)},

		{Method: get, Path: "/v1/providers", RPC: "providers.list", Scope: read, Tag: "providers", Summary: "List LLM providers", Op: op(s.listProviders)},
		{Method: post, Path: "/v1/providers", RPC: "providers.create", Scope: admin, Tag: "providers", Summary: "Create a provider", Status: created, Op: op(s.createProvider)},
		{Method: get, Path: "/v1/providers/{id}", RPC: "providers.get", Scope: read, Tag: "providers", Summary: "Get a provider by id or name (an admin also sees each key's state, masked, and the last error)", Op: op(s.getProvider)},
		{Method: put, Path: "/v1/providers/{id}", RPC: "providers.update", Scope: admin, Tag: "providers", Summary: "Update a provider (absent fields keep their value)", Op: op(s.updateProvider)},
		{Method: del, Path: "/v1/providers/{id}", RPC: "providers.delete", Scope: admin, Tag: "providers", Summary: "Delete a provider no agent uses (as its provider or a fallback)", Status: noContent, Op: op(s.deleteProvider)},
		{Method: get, Path: "/v1/providers/{id}/models", RPC: "providers.models", Scope: admin, Tag: "providers", Summary: "The provider's models, listed by its own API (an upstream failure: 502)", Op: op(s.providerModels)},
		{Method: post, Path: "/v1/providers/{id}/verify", RPC: "providers.verify", Scope: admin, Tag: "providers", Summary: "Make the provider's cheapest authenticated call (even disabled): {ok, latency_ms, error?}", Op: op(s.verifyProvider)},

		{Method: get, Path: "/v1/agents", RPC: "agents.list", Scope: read, Tag: "agents", Summary: "List agents the user owns or that are shared with them (a trusted caller acting for no user: every agent)", Op: op(s.listAgents)},
		{Method: post, Path: "/v1/agents", RPC: "agents.create", Scope: write, NeedUser: true, Tag: "agents", Summary: "Create an agent owned by the user", Status: created, Op: op(s.createAgent)},
		{Method: get, Path: "/v1/agents/{id}", RPC: "agents.get", Scope: read, Tag: "agents", Summary: "Get an agent by id or agent_key (a trusted caller acting for no user: any agent)", Op: op(s.getAgent)},
		{Method: put, Path: "/v1/agents/{id}", RPC: "agents.update", Scope: write, NeedUser: true, Tag: "agents", Summary: "Update an agent (owner only)", Op: op(s.updateAgent)},
		{Method: del, Path: "/v1/agents/{id}", RPC: "agents.delete", Scope: write, NeedUser: true, Tag: "agents", Summary: "Delete an agent (owner only)", Status: noContent, Op: op(s.deleteAgent)},
		{Method: get, Path: "/v1/agents/{id}/sharing", RPC: "agents.sharing.list", Scope: read, NeedUser: true, Tag: "agents", Summary: "List an agent's shares (owner and operators)", Op: op(s.listShares)},
		{Method: post, Path: "/v1/agents/{id}/sharing", RPC: "agents.sharing.add", Scope: write, NeedUser: true, Tag: "agents", Summary: "Share an agent with a user as user (read, run) or operator (also edit the prompt); owner only", Status: created, Op: op(s.shareAgent)},
		{Method: del, Path: "/v1/agents/{id}/sharing/{userID}", RPC: "agents.sharing.remove", Scope: write, NeedUser: true, Tag: "agents", Summary: "Revoke a user's access to an agent; owner only", Status: noContent, Op: op(s.unshareAgent)},
		{Method: post, Path: "/v1/agents/{id}/resummon", RPC: "agents.resummon", Scope: write, NeedUser: true, Tag: "agents", Summary: "Retry the initial summoning (its provider writes the prompt from other_config.description); owner only", Status: fasthttp.StatusAccepted, Op: op(s.resummon)},
		{Method: post, Path: "/v1/agents/{id}/regenerate", RPC: "agents.regenerate", Scope: write, NeedUser: true, Tag: "agents", Summary: "Have the agent's provider rewrite its system prompt from a change request; owner or operator", Op: op(s.regenerate)},
		{Method: get, Path: "/v1/agents/{id}/instances", RPC: "agents.instances.list", Scope: read, NeedUser: true, Tag: "agents", Summary: "List the agent's user instances (all for its owner and operators, one's own otherwise)", Op: op(s.listInstances)},
		{Method: get, Path: "/v1/agents/{id}/instances/{userID}/files", RPC: "agents.files.list", Scope: read, NeedUser: true, Tag: "agents", Summary: "List an instance's context files (SYSTEM.md read-only, USER.md editable)", Op: op(s.listInstanceFiles)},
		{Method: put, Path: "/v1/agents/{id}/instances/{userID}/files/{fileName}", RPC: "agents.files.put", Scope: write, NeedUser: true, Tag: "agents", Summary: "Store the caller's own USER.md (the body is the text, or {content}); any other file: 403", Op: op(s.putInstanceFile)},
		{Method: post, Path: "/v1/agents/{id}/wake", RPC: "agents.wake", Scope: write, NeedUser: true, Tag: "agents", Summary: "Run the agent once on a message", Op: op(s.wake)},

		{Method: get, Path: "/v1/usage", RPC: "usage.get", Scope: read, Tag: "usage", Summary: "Usage time series: runs, tokens, errors and tool calls by hour or day, grouped and filtered (own user's unless admin)", Op: op(s.usage)},
		{Method: get, Path: "/v1/usage/summary", RPC: "usage.summary", Scope: read, Tag: "usage", Summary: "Usage of a period (24h, today, 7d, 30d) and of the period before it", Op: op(s.summary)},
		{Method: get, Path: "/v1/traces", RPC: "traces.list", Scope: read, Tag: "traces", Summary: "Run traces, newest first; filters agent_id, user_id, session_key, status, from, to", Op: op(s.listTraces)},
		{Method: get, Path: "/v1/traces/{id}", RPC: "traces.get", Scope: read, Tag: "traces", Summary: "One trace with all its spans, as a tree", Op: op(s.getTrace)},
		{Method: get, Path: "/v1/activity", RPC: "activity.list", Scope: admin, Tag: "activity", Summary: "Audit log of every change made through the gateway, newest first; filters actor_type, actor_id, action, entity_type, entity_id, user_id, from, to", Op: op(s.listActivity)},
		{Method: get, Path: "/v1/tools/custom", RPC: "tools.custom.list", Scope: read, Tag: "tools", Summary: "Custom tools (filter agent_id; limit, offset); env values are never shown", Op: op(s.listTools)},
		{Method: post, Path: "/v1/tools/custom", RPC: "tools.custom.create", Scope: admin, Status: created, Tag: "tools", Summary: "Create a custom tool: a command run on the host (needs tools.exec_enabled)", Op: op(s.createTool)},
		{Method: get, Path: "/v1/tools/custom/{id}", RPC: "tools.custom.get", Scope: read, Tag: "tools", Summary: "Get a custom tool by id or name", Op: op(s.getTool)},
		{Method: put, Path: "/v1/tools/custom/{id}", RPC: "tools.custom.update", Scope: admin, Tag: "tools", Summary: "Update a custom tool (absent fields kept; env replaced when given)", Op: op(s.updateTool)},
		{Method: del, Path: "/v1/tools/custom/{id}", RPC: "tools.custom.delete", Scope: admin, Status: noContent, Tag: "tools", Summary: "Delete a custom tool", Op: op(s.deleteTool)},
		{Method: post, Path: "/v1/tools/invoke", RPC: "tools.invoke", Scope: write, Tag: "tools", Summary: "Run one of an agent's tools (custom, MCP server.tool, built-in) with its grants; dryRun describes it", Op: op(s.invoke)},
		{Method: get, Path: "/v1/mcp/servers", RPC: "mcp.servers.list", Scope: read, Tag: "mcp", Summary: "MCP servers (header and env values never shown)", Op: op(s.listMCP)},
		{Method: post, Path: "/v1/mcp/servers", RPC: "mcp.servers.create", Scope: admin, Status: created, Tag: "mcp", Summary: "Register an MCP server: stdio (command, args, env; needs tools.exec_enabled), streamable-http or sse (url, headers)", Op: op(s.createMCP)},
		{Method: get, Path: "/v1/mcp/servers/{id}", RPC: "mcp.servers.get", Scope: read, Tag: "mcp", Summary: "An MCP server with its live status and tools", Op: op(s.getMCP)},
		{Method: put, Path: "/v1/mcp/servers/{id}", RPC: "mcp.servers.update", Scope: admin, Tag: "mcp", Summary: "Update an MCP server (its connection reopens)", Op: op(s.updateMCP)},
		{Method: del, Path: "/v1/mcp/servers/{id}", RPC: "mcp.servers.delete", Scope: admin, Status: noContent, Tag: "mcp", Summary: "Delete an MCP server, its grants and requests", Op: op(s.deleteMCP)},
		{Method: post, Path: "/v1/mcp/servers/{id}/grants/agent", RPC: "mcp.grants.agent.add", Scope: admin, Status: created, Tag: "mcp", Summary: "Grant the server to an agent {agent_id, tool_allow?, tool_deny?}", Op: op(s.grantAgent)},
		{Method: del, Path: "/v1/mcp/servers/{id}/grants/agent/{agentID}", RPC: "mcp.grants.agent.remove", Scope: admin, Status: noContent, Tag: "mcp", Summary: "Revoke the server from an agent", Op: op(s.revokeAgent)},
		{Method: get, Path: "/v1/mcp/grants/agent/{agentID}", RPC: "mcp.grants.agent.list", Scope: read, Tag: "mcp", Summary: "The MCP grants of an agent", Op: op(s.agentGrants)},
		{Method: post, Path: "/v1/mcp/servers/{id}/grants/user", RPC: "mcp.grants.user.add", Scope: admin, Status: created, Tag: "mcp", Summary: "Grant the server to a user's runs {user_id, tool_allow?, tool_deny?}", Op: op(s.grantUser)},
		{Method: del, Path: "/v1/mcp/servers/{id}/grants/user/{userID}", RPC: "mcp.grants.user.remove", Scope: admin, Status: noContent, Tag: "mcp", Summary: "Revoke the server from a user", Op: op(s.revokeUser)},
		{Method: post, Path: "/v1/mcp/requests", RPC: "mcp.requests.create", Scope: write, NeedUser: true, Status: created, Tag: "mcp", Summary: "Ask for access to a server {server_id, agent_id?, reason}", Op: op(s.createRequest)},
		{Method: get, Path: "/v1/mcp/requests", RPC: "mcp.requests.list", Scope: read, Tag: "mcp", Summary: "Access requests (status=pending by default; own user's unless admin)", Op: op(s.listRequests)},
		{Method: post, Path: "/v1/mcp/requests/{id}/review", RPC: "mcp.requests.review", Scope: admin, Tag: "mcp", Summary: "Approve (the grant is created with the review) or deny {approved, note}; a reviewed request is 412", Op: op(s.reviewRequest)},
		{Method: get, Path: "/v1/agents/{id}/skills", RPC: "agents.skills.list", Scope: read, Tag: "skills", Summary: "Every skill with the agent's grant (and pinned version)", Op: op(s.agentSkills)},
		{Method: get, Path: "/v1/skills", RPC: "skills.list", Scope: read, Tag: "skills", Summary: "Skills, system ones included (filters enabled, system, tag, search)", Op: op(s.listSkills)},
		{Method: post, Path: "/v1/skills/upload", RPC: "skills.upload", Scope: admin, Status: created, Upload: true, Tag: "skills", Summary: "Upload a ZIP holding SKILL.md (max 20 MB): a new skill, or a new version of the skill with its slug", Op: op(s.uploadSkill)},
		{Method: get, Path: "/v1/skills/{id}", RPC: "skills.get", Scope: read, Tag: "skills", Summary: "Get a skill by id or slug", Op: op(s.getSkill)},
		{Method: put, Path: "/v1/skills/{id}", RPC: "skills.update", Scope: admin, Tag: "skills", Summary: "Update a skill's metadata (description, tags, visibility)", Op: op(s.updateSkill)},
		{Method: del, Path: "/v1/skills/{id}", RPC: "skills.delete", Scope: admin, Status: noContent, Tag: "skills", Summary: "Delete a skill (not a system skill: 403)", Op: op(s.deleteSkill)},
		{Method: post, Path: "/v1/skills/{id}/toggle", RPC: "skills.toggle", Scope: admin, Tag: "skills", Summary: "Enable or disable a skill", Op: op(s.toggleSkill)},
		{Method: get, Path: "/v1/skills/{id}/versions", RPC: "skills.versions", Scope: read, Tag: "skills", Summary: "A skill's versions: size, hash, who and when", Op: op(s.skillVersions)},
		{Method: get, Path: "/v1/skills/{id}/files", RPC: "skills.files", Scope: read, Tag: "skills", Summary: "Files of a skill version (?version=, default the latest)", Op: op(s.skillFiles)},
		{Method: get, Path: "/v1/skills/{id}/files/{path:*}", RPC: "skills.files.get", Scope: read, Tag: "skills", Content: "text/plain", Summary: "One file of a skill version (?version=)", Op: op(s.skillFile)},
		{Method: post, Path: "/v1/skills/{id}/grants/agent", RPC: "skills.grants.agent.add", Scope: admin, Status: created, Tag: "skills", Summary: "Grant a skill to an agent {agent_id, version?} (no version: the latest)", Op: op(s.grantSkill)},
		{Method: del, Path: "/v1/skills/{id}/grants/agent/{agentID}", RPC: "skills.grants.agent.remove", Scope: admin, Status: noContent, Tag: "skills", Summary: "Revoke a skill from an agent", Op: op(s.revokeSkill)},
		{Method: get, Path: "/v1/files", RPC: "files.list", Scope: read, Tag: "files", Summary: "Files in an agent's workspace (agent_id or X-Gateway-Agent-Id; prefix): path, size, modified, content type", Op: op(s.listFiles)},
		{Method: get, Path: "/v1/files/{path:*}", RPC: "files.get", Scope: read, QueryToken: true, Tag: "files", Content: "application/octet-stream", Summary: "Serve a workspace file: path is <agent>/<path in its workspace> (Range; ?token=)", Op: op(s.getFile)},
		{Method: del, Path: "/v1/storage/{path:*}", RPC: "storage.delete", Scope: write, NeedUser: false, Status: noContent, Tag: "files", Summary: "Delete a workspace file (<agent>/<path>; the agent's owner)", Op: op(s.deleteFile)},
		{Method: post, Path: "/v1/media/upload", RPC: "media.upload", Scope: write, Status: created, Upload: true, Tag: "media", Summary: "Upload a media file (multipart field file; at most max_upload_bytes)", Op: op(s.uploadMedia)},
		{Method: del, Path: "/v1/media/{id}", RPC: "media.delete", Scope: write, Status: noContent, Tag: "media", Summary: "Delete a media file (its uploader, or an admin); frees its bytes against gateway.quotas.media_bytes_per_user", Op: op(s.deleteMedia)},
		{Method: get, Path: "/v1/media/{id}", RPC: "media.get", Scope: read, QueryToken: true, Tag: "media", Content: "application/octet-stream", Summary: "Serve a media file (allow-listed types inline, others as attachments; Range; ?token= for <img> and <audio>)", Op: op(s.getMedia)},
		{Method: get, Path: "/v1/delegations", RPC: "delegations.list", Scope: read, Tag: "delegations", Summary: "Delegation history, newest first (filters source_agent_id, target_agent_id, user_id, status)", Op: op(s.listDelegations)},
		{Method: get, Path: "/v1/delegations/{id}", RPC: "delegations.get", Scope: read, Tag: "delegations", Summary: "One delegation", Op: op(s.getDelegation)},
		{Method: get, Path: "/v1/memory", RPC: "memory.list", Scope: read, Tag: "memory", Summary: "Memory entries (filters agent_id, user_id; q ranks them by relevance)", Op: op(s.listMemory)},
		{Method: post, Path: "/v1/memory", RPC: "memory.create", Scope: write, Status: created, Tag: "memory", Summary: "Create a memory entry {content, agent_id?, user_id?, tags?}", Op: op(s.createMemory)},
		{Method: del, Path: "/v1/memory/{id}", RPC: "memory.delete", Scope: write, Status: noContent, Tag: "memory", Summary: "Delete a memory entry", Op: op(s.deleteMemory)},
		{Method: get, Path: "/v1/budgets", RPC: "budgets.list", Scope: read, Tag: "budgets", Summary: "Budgets with their spend (admin: every one; mine=true: the caller's user, keys and agents)", Op: op(s.listBudgets)},
		{Method: post, Path: "/v1/budgets", RPC: "budgets.create", Scope: admin, Status: created, Tag: "budgets", Summary: "Create a budget: subject {type user|agent|api_key, id}, period day|month|total, max_usd, max_tokens, max_tokens_per_minute", Op: op(s.createBudget)},
		{Method: get, Path: "/v1/budgets/{id}", RPC: "budgets.get", Scope: admin, Tag: "budgets", Summary: "Get a budget with its spend in the current period", Op: op(s.getBudget)},
		{Method: put, Path: "/v1/budgets/{id}", RPC: "budgets.update", Scope: admin, Tag: "budgets", Summary: "Update a budget's period and caps (absent fields kept; the subject is fixed)", Op: op(s.updateBudget)},
		{Method: del, Path: "/v1/budgets/{id}", RPC: "budgets.delete", Scope: admin, Status: noContent, Tag: "budgets", Summary: "Delete a budget and its ledger", Op: op(s.deleteBudget)},

		{Method: get, Path: "/v1/channel-instances", RPC: "channels.list", Scope: read, Tag: "channels", Summary: "Channel instances (credentials masked)", Op: op(s.listChannels)},
		{Method: post, Path: "/v1/channel-instances", RPC: "channels.create", Scope: admin, Status: created, Tag: "channels", Summary: "Create a channel instance (webhook: config {async, callback_url}, credentials {secret})", Op: op(s.createChannel)},
		{Method: get, Path: "/v1/channel-instances/{id}", RPC: "channels.get", Scope: read, Tag: "channels", Summary: "Get a channel instance by id or name", Op: op(s.getChannel)},
		{Method: put, Path: "/v1/channel-instances/{id}", RPC: "channels.update", Scope: admin, Tag: "channels", Summary: "Update a channel instance (absent fields kept; credentials replaced when given)", Op: op(s.updateChannel)},
		{Method: del, Path: "/v1/channel-instances/{id}", RPC: "channels.delete", Scope: admin, Status: noContent, Tag: "channels", Summary: "Delete a channel instance", Op: op(s.deleteChannel)},
		{Method: post, Path: "/v1/channels/{id}/inbound", RPC: "channels.inbound", Public: true, Tag: "channels", Content: "application/json", Summary: "A webhook instance's inbound message, signed with HMAC-SHA256 (X-Gatehouse-Timestamp, X-Gatehouse-Signature): runs its agent for the sender", Op: op(s.inbound)},
		{Method: get, Path: "/v1/sessions", RPC: "sessions.list", Scope: read, Tag: "sessions", Summary: "List sessions, newest first (paginated; a caller acting for a user sees that user's only); other session operations are WebSocket methods", Op: op(s.listSessions)},
		{Method: get, Path: "/v1/models", RPC: "models.list", Scope: read, Tag: "chat", Summary: "The agents the caller may run, as OpenAI models (gateway:<agent_key>)", Op: op(s.listModels)},
		{Method: post, Path: "/v1/chat/completions", RPC: "chat.completions", Scope: write, Tag: "chat", Summary: "OpenAI-compatible chat completion with an agent", Op: op(s.chatCompletions)},
		{Method: post, Path: "/v1/responses", RPC: "responses.create", Scope: write, Tag: "chat", Summary: "Responses-style run of an agent", Op: op(s.responses)},
	}
}
