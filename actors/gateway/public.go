package gateway

import (
	"encoding/json"

	"github.com/google/uuid"
)

// What a caller who is not a trusted backend sees of the operators'
// configuration: names, kinds and state, enough to pick a provider, see a
// tool's purpose or ask for an MCP server, but never how something is
// reached or run (URLs, commands, arguments, working dirs, settings,
// config), no part of a secret (hints, header and env names), and no
// other user's agent id. Each Public returns a copy; transports call it
// for every answer to such a caller (policy.go decides who is trusted).

// Public is p without its endpoint, credential hints and settings.
func (p Provider) Public() Provider {
	p.APIBase, p.APIKeyHint, p.Settings = "", "", json.RawMessage("{}")
	p.APIKeysSealed, p.APIKeysHint = nil, []string{}
	return p
}

// Public is t without its command, working dir, env names and agent.
func (t CustomTool) Public() CustomTool {
	t.Command, t.WorkingDir, t.EnvKeys, t.AgentID = []string{}, "", []string{}, nil
	return t
}

// Public is s without its command, arguments, URL, header and env names.
func (s MCPServer) Public() MCPServer {
	s.Command, s.Args, s.URL, s.HeaderKeys, s.EnvKeys = "", []string{}, "", []string{}, []string{}
	return s
}

// Public is c without its config, credential hints and agent.
func (c ChannelInstance) Public() ChannelInstance {
	c.Config, c.Credentials, c.AgentID = json.RawMessage("{}"), map[string]string{}, uuid.Nil
	return c
}
