package gateway

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"

	"gatehouse/actors"
	"gatehouse/actors/gateway/pricing"
	"gatehouse/wal"
)

// WAL record types of the gateway (each domain owns the types its Owns claims; the gateway 64..75). The numbers are
// part of the on-disk format: never reuse or renumber one. A new payload
// layout gets a new number; doc.go has the table.
const (
	// Written by builds before entity records: decoded, never written.
	recLegacyAPIKeyPut   wal.Type = 64 // JSON apiKeyRec (data v1)
	recLegacyProviderPut wal.Type = 65 // JSON providerRec (data v1)
	recLegacyProviderDel wal.Type = 66 // 16-byte provider id
	recLegacyAgentPut    wal.Type = 67 // JSON agentRec (data v1)
	recLegacyAgentDel    wal.Type = 68 // 16-byte agent id
	recLegacyRunRecorded wal.Type = 69 // JSON runRec (v1 without "v")

	recEntitySaved   wal.Type = 70 // JSON entityJSON: one entity's full state
	recEntityDeleted wal.Type = 71 // JSON deletedJSON
	recRunRecorded   wal.Type = 72 // JSON runJSON
	recSessionTurn   wal.Type = 73 // JSON turnJSON: one turn appended to a session
	// Budgets (budgetledger.go).
	recBudgetReserved wal.Type = 74 // JSON budgetReserved: a call's worst case held against a budget
	recBudgetSettled  wal.Type = 75 // JSON budgetSettled: its actual cost; the rest released
)

func owns(t wal.Type) bool { return t >= recLegacyAPIKeyPut && t <= recBudgetSettled }

// event is one change to the gateway's durable state: what a record holds.
// state.apply applies it; record encodes it.
type event interface {
	record() wal.Record
}

// entitySaved is the full state of one configuration entity: a create or
// an update (revoking an API key is an update).
type entitySaved struct{ ent entity }

// entityDeleted removes one configuration entity.
type entityDeleted struct {
	kind kind
	id   uuid.UUID
}

// runRecorded is one finished agent run; usage is derived from it.
type runRecorded struct{ run *runRec }

// sessionTurnAppended is one finished turn of a session: its messages
// (the question, and the answer unless the turn failed) and tokens. The
// session's history is bounded when it is applied.
type sessionTurnAppended struct{ turn *turnJSON }

// turnJSON is the payload of recSessionTurn: version 1.
type turnJSON struct {
	V                uint8            `json:"v"`
	SessionID        uuid.UUID        `json:"session_id"`
	Messages         []SessionMessage `json:"messages"`
	PromptTokens     int64            `json:"prompt_tokens"`
	CompletionTokens int64            `json:"completion_tokens"`
	// CostNano (optional): what the turn's calls cost, in nano-USD.
	CostNano int64     `json:"cost_nano,omitempty"`
	At       time.Time `json:"at"`
}

const turnVersion = 1

func (e sessionTurnAppended) record() wal.Record {
	t := *e.turn
	t.V = turnVersion
	return jsonRecord(recSessionTurn, t)
}

// entityJSON is the payload of recEntitySaved and one entity of a
// snapshot section: V is the version of Kind's data layout.
type entityJSON struct {
	Kind kind            `json:"kind"`
	V    uint8           `json:"v"`
	Data json.RawMessage `json:"data"`
}

// deletedJSON is the payload of recEntityDeleted.
type deletedJSON struct {
	Kind kind      `json:"kind"`
	ID   uuid.UUID `json:"id"`
}

// runJSON is the payload of recRunRecorded: version 1.
type runJSON struct {
	V uint8 `json:"v"`
	runRec
}

const runVersion = 1

func (e entitySaved) record() wal.Record { return jsonRecord(recEntitySaved, encodeEntity(e.ent)) }

func (e entityDeleted) record() wal.Record {
	return jsonRecord(recEntityDeleted, deletedJSON{Kind: e.kind, ID: e.id})
}

func (e runRecorded) record() wal.Record {
	return jsonRecord(recRunRecorded, runJSON{V: runVersion, runRec: *e.run})
}

func encodeEntity(ent entity) entityJSON {
	k, _ := ent.ref()
	return entityJSON{Kind: k, V: kinds[k].v, Data: mustJSON(ent)}
}

// orEmpty is s, or an empty slice for nil: views list [] rather than null.
func orEmpty[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

func jsonRecord(t wal.Type, v any) wal.Record { return wal.Record{Type: t, Data: mustJSON(v)} }

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("gateway: marshal %T: %v", v, err)) // plain structs: cannot fail
	}
	return b
}

// legacyKinds are the kinds of the pre-entity put and delete records.
var legacyKinds = map[wal.Type]kind{
	recLegacyAPIKeyPut: kindAPIKey, recLegacyProviderPut: kindProvider, recLegacyProviderDel: kindProvider,
	recLegacyAgentPut: kindAgent, recLegacyAgentDel: kindAgent,
}

// decodeEvent decodes a record of one of the gateway's types; errors wrap
// actors.ErrCorrupt.
func decodeEvent(r wal.Record) (event, error) {
	ev, err := decodeEventData(r)
	if err != nil {
		return nil, fmt.Errorf("gateway record type %d: %w: %w", r.Type, actors.ErrCorrupt, err)
	}
	return ev, nil
}

func decodeEventData(r wal.Record) (event, error) {
	switch r.Type {
	case recEntitySaved:
		var e entityJSON
		if err := json.Unmarshal(r.Data, &e); err != nil {
			return nil, err
		}
		ent, err := e.decode()
		return entitySaved{ent}, err
	case recEntityDeleted:
		var d deletedJSON
		if err := json.Unmarshal(r.Data, &d); err != nil {
			return nil, err
		}
		return deleted(d.Kind, d.ID)
	case recRunRecorded:
		var rj runJSON
		if err := json.Unmarshal(r.Data, &rj); err != nil {
			return nil, err
		}
		if rj.V != runVersion {
			return nil, fmt.Errorf("run layout v%d unsupported", rj.V)
		}
		return runRecorded{&rj.runRec}, nil
	case recSessionTurn:
		t := new(turnJSON)
		if err := json.Unmarshal(r.Data, t); err != nil {
			return nil, err
		}
		if t.V != turnVersion || t.SessionID == uuid.Nil {
			return nil, fmt.Errorf("session turn v%d for %s unsupported", t.V, t.SessionID)
		}
		return sessionTurnAppended{t}, nil
	case recBudgetReserved, recBudgetSettled:
		return decodeBudgetEvent(r)
	case recLegacyAPIKeyPut, recLegacyProviderPut, recLegacyAgentPut:
		ent, err := decodeEntity(legacyKinds[r.Type], 1, r.Data)
		return entitySaved{ent}, err
	case recLegacyProviderDel, recLegacyAgentDel:
		id, err := uuid.FromBytes(r.Data)
		if err != nil {
			return nil, err
		}
		return deleted(legacyKinds[r.Type], id)
	case recLegacyRunRecorded:
		run := new(runRec)
		return runRecorded{run}, json.Unmarshal(r.Data, run)
	}
	return nil, fmt.Errorf("unknown type")
}

func deleted(k kind, id uuid.UUID) (event, error) {
	if spec, ok := kinds[k]; !ok || spec.kept || id == uuid.Nil {
		return nil, fmt.Errorf("delete of %q %s", k, id)
	}
	return entityDeleted{kind: k, id: id}, nil
}

func (e entityJSON) decode() (entity, error) { return decodeEntity(e.Kind, e.V, e.Data) }

// kind names an entity kind in records and snapshots: never rename one.
type kind string

// The entity kinds.
const (
	kindAPIKey       kind = "api_key"
	kindProvider     kind = "provider"
	kindAgent        kind = "agent"
	kindUserFile     kind = "user_file"
	kindSession      kind = "session"
	kindActivity     kind = "activity"
	kindChannel      kind = "channel_instance"
	kindCustomTool   kind = "custom_tool"
	kindMemory       kind = "memory"
	kindDelegation   kind = "delegation"
	kindMCPServer    kind = "mcp_server"
	kindMCPGrant     kind = "mcp_grant"
	kindMCPRequest   kind = "mcp_request"
	kindMedia        kind = "media"
	kindSkill        kind = "skill"
	kindSkillVersion kind = "skill_version"
	kindSkillGrant   kind = "skill_grant"
	kindBudget       kind = "budget"
	kindBudgetLedger kind = "budget_ledger"
)

// owner is the part of the state (and so the actor) an entity belongs to.
type owner uint8

const (
	ownerKeys     owner = iota + 1 // the key shard of the key's hash
	ownerRegistry                  // the registry actor
	ownerEntity                    // whoever owns the entity it is about (activity)
	ownerTenant                    // the tenant shard of its routing key (tenants.go)
)

// kindSpec declares an entity kind: the data version written, the decoder
// of every version it knows, and the owner that applies it.
type kindSpec struct {
	v      uint8
	decode func(v uint8, data []byte) (entity, error)
	owner  owner
	// kept: entities of the kind are never deleted (they age out), so a
	// delete record of it is corrupt.
	kept bool
}

// kinds declares every entity kind; adding one is a line here, its record
// struct below, and its table in state.go (registryPart.tables).
var kinds = map[kind]kindSpec{
	kindAPIKey:       {v: 1, decode: decodeV1[apiKeyRec], owner: ownerKeys},
	kindProvider:     {v: 1, decode: decodeV1[providerRec], owner: ownerRegistry},
	kindAgent:        {v: 1, decode: decodeV1[agentRec], owner: ownerRegistry},
	kindUserFile:     {v: 1, decode: decodeV1[userFileRec], owner: ownerRegistry},
	kindSession:      {v: 1, decode: decodeV1[sessionRec], owner: ownerTenant},
	kindActivity:     {v: 1, decode: decodeV1[activityRec], owner: ownerEntity, kept: true},
	kindChannel:      {v: 1, decode: decodeV1[channelRec], owner: ownerRegistry},
	kindCustomTool:   {v: 1, decode: decodeV1[customToolRec], owner: ownerRegistry},
	kindMemory:       {v: 1, decode: decodeV1[memoryRec], owner: ownerTenant},
	kindDelegation:   {v: 1, decode: decodeV1[delegationRec], owner: ownerRegistry, kept: true},
	kindMCPServer:    {v: 1, decode: decodeV1[mcpServerRec], owner: ownerRegistry},
	kindMCPGrant:     {v: 1, decode: decodeV1[mcpGrantRec], owner: ownerRegistry},
	kindMCPRequest:   {v: 1, decode: decodeV1[mcpRequestRec], owner: ownerRegistry},
	kindMedia:        {v: 1, decode: decodeV1[mediaRec], owner: ownerRegistry},
	kindSkill:        {v: 1, decode: decodeV1[skillRec], owner: ownerRegistry},
	kindSkillVersion: {v: 1, decode: decodeV1[skillVersionRec], owner: ownerRegistry},
	kindSkillGrant:   {v: 1, decode: decodeV1[skillGrantRec], owner: ownerRegistry},
	kindBudget:       {v: 1, decode: decodeV1[budgetRec], owner: ownerRegistry},
	kindBudgetLedger: {v: 1, decode: decodeV1[ledgerRec], owner: ownerTenant},
}

// entity is the durable state of one configuration entity. Applied
// entities are immutable: an update applies a new one.
type entity interface {
	ref() (kind, uuid.UUID)
}

func decodeEntity(k kind, v uint8, data []byte) (entity, error) {
	spec, ok := kinds[k]
	if !ok {
		return nil, fmt.Errorf("unknown entity kind %q", k)
	}
	ent, err := spec.decode(v, data)
	if err != nil {
		return nil, fmt.Errorf("%s v%d: %w", k, v, err)
	}
	if _, id := ent.ref(); id == uuid.Nil {
		return nil, fmt.Errorf("%s without id", k)
	}
	return ent, nil
}

// decodeV1 decodes the first data layout of a kind whose record struct is R.
func decodeV1[R any, P interface {
	*R
	entity
}](v uint8, data []byte) (entity, error) {
	if v != 1 {
		return nil, fmt.Errorf("layout v%d unsupported", v)
	}
	p := P(new(R))
	if err := json.Unmarshal(data, p); err != nil {
		return nil, err
	}
	return p, nil
}

// The record structs: the durable layout of each kind, separate from the
// API types (types.go) they are viewed as. Their JSON names are the ones
// the legacy records 64..69 used, so those decode into them unchanged.

// apiKeyRec is a gateway API key (kind api_key, data v1).
type apiKeyRec struct {
	ID      uuid.UUID `json:"id"`
	Name    string    `json:"name"`
	Preview string    `json:"preview"`
	Hash    [32]byte  `json:"hash"`
	Scopes  []Scope   `json:"scopes"`
	// UserID is the user the key acts for (absent in keys made before
	// keys were bound to users).
	UserID    string    `json:"user_id,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	ExpiresAt time.Time `json:"expires_at,omitzero"`
	RevokedAt time.Time `json:"revoked_at,omitzero"`
}

func (k *apiKeyRec) ref() (kind, uuid.UUID) { return kindAPIKey, k.ID }

func (k *apiKeyRec) active(now time.Time) bool { return activeAt(k.RevokedAt, k.ExpiresAt, now) }

func (k *apiKeyRec) view() APIKey {
	return APIKey{
		ID: k.ID, Name: k.Name, Preview: k.Preview, Hash: k.Hash, Scopes: k.Scopes, UserID: k.UserID,
		CreatedAt: k.CreatedAt, ExpiresAt: k.ExpiresAt, RevokedAt: k.RevokedAt,
	}
}

// providerRec is an LLM provider (kind provider, data v1); the credential
// is sealed.
type providerRec struct {
	ID           uuid.UUID       `json:"id"`
	Name         string          `json:"name"`
	DisplayName  string          `json:"display_name"`
	ProviderType string          `json:"provider_type"`
	APIBase      string          `json:"api_base"`
	APIKeySealed []byte          `json:"api_key_sealed,omitempty"`
	APIKeyHint   string          `json:"api_key_hint,omitempty"`
	Enabled      bool            `json:"enabled"`
	Settings     json.RawMessage `json:"settings,omitempty"`
	CreatedAt    time.Time       `json:"created_at"`
	UpdatedAt    time.Time       `json:"updated_at"`
	// APIKeysSealed is the key pool, each key sealed like APIKeySealed,
	// and APIKeysHint their masks in the same order; both absent in
	// records written before key pools, and when the pool is empty.
	APIKeysSealed [][]byte `json:"api_keys_sealed,omitempty"`
	APIKeysHint   []string `json:"api_keys_hint,omitempty"`
}

func (p *providerRec) ref() (kind, uuid.UUID) { return kindProvider, p.ID }

func (p *providerRec) view() Provider {
	settings := p.Settings
	if len(settings) == 0 || string(settings) == "null" {
		settings = json.RawMessage("{}")
	}
	return Provider{
		ID: p.ID, Name: p.Name, DisplayName: p.DisplayName, ProviderType: p.ProviderType, APIBase: p.APIBase,
		APIKeySealed: p.APIKeySealed, APIKeyHint: p.APIKeyHint, Enabled: p.Enabled, Settings: settings,
		APIKeysSealed: p.APIKeysSealed, APIKeysHint: orEmpty(p.APIKeysHint),
		CreatedAt: p.CreatedAt, UpdatedAt: p.UpdatedAt,
	}
}

// agentRec is an agent (kind agent, data v1).
type agentRec struct {
	ID             uuid.UUID `json:"id"`
	AgentKey       string    `json:"agent_key"`
	DisplayName    string    `json:"display_name"`
	OwnerID        string    `json:"owner_id"`
	ProviderID     uuid.UUID `json:"provider_id"`
	Model          string    `json:"model"`
	SystemPrompt   string    `json:"system_prompt"`
	Status         string    `json:"status"`
	TimeoutSeconds int       `json:"timeout_seconds"`
	SharedWith     []string  `json:"shared_with,omitempty"`
	// Operators are the users of SharedWith with the operator role (may
	// also edit the prompt); absent in records written before roles.
	Operators []string `json:"operators,omitempty"`
	// Description is the summoning brief; SummonError why summoning
	// failed; MaxToolIterations 0 means the default (20). All absent in
	// records written before them.
	Description string `json:"description,omitempty"`
	SummonError string `json:"summon_error,omitempty"`
	// SummonNode is the cluster node running the summon while the agent
	// is summoning ("" on a single node, and in records before it).
	SummonNode        string    `json:"summon_node,omitempty"`
	MaxToolIterations int       `json:"max_tool_iterations,omitempty"`
	IsDefault         bool      `json:"is_default,omitempty"`
	CreatedAt         time.Time `json:"created_at"`
	UpdatedAt         time.Time `json:"updated_at"`
	// Fallbacks and MaxTokens (other_config.max_tokens, 0: unset) are
	// absent in records written before them.
	Fallbacks []fallbackRec `json:"fallbacks,omitempty"`
	MaxTokens int           `json:"max_tokens,omitempty"`
}

// fallbackRec is one of an agent's fallbacks: a provider by id, a model.
type fallbackRec struct {
	ProviderID uuid.UUID `json:"provider_id"`
	Model      string    `json:"model"`
}

func (a *agentRec) ref() (kind, uuid.UUID) { return kindAgent, a.ID }

// userFileRec is one of a user's context files for one agent (kind
// user_file, data v1): today only USER.md. Its id is derived from agent,
// user and name (userFileID), so a save replaces the previous content.
type userFileRec struct {
	ID        uuid.UUID `json:"id"`
	AgentID   uuid.UUID `json:"agent_id"`
	UserID    string    `json:"user_id"`
	Name      string    `json:"name"`
	Content   string    `json:"content"`
	UpdatedAt time.Time `json:"updated_at"`
}

func (f *userFileRec) ref() (kind, uuid.UUID) { return kindUserFile, f.ID }

// userFileNS is the namespace of user file ids (a fixed, random UUID).
var userFileNS = uuid.MustParse("6b1f4a1e-2f64-4f7e-9c1d-5e0a3b2c7d90")

// userFileID is the id of user's file name for agent.
func userFileID(agent uuid.UUID, user, name string) uuid.UUID {
	return uuid.NewSHA1(userFileNS, []byte(agent.String()+"\x00"+user+"\x00"+name))
}

func (a *agentRec) canUse(user string) bool { return usableBy(a.OwnerID, a.SharedWith, user) }

// roleOf is user's share role ("" when the agent is not shared with user).
func (a *agentRec) roleOf(user string) ShareRole {
	switch {
	case slices.Contains(a.Operators, user):
		return ShareOperator
	case slices.Contains(a.SharedWith, user):
		return ShareUser
	}
	return ""
}

// shares lists the agent's shares by user id (never nil).
func (a *agentRec) shares() []Share {
	out := make([]Share, 0, len(a.SharedWith))
	for _, u := range a.SharedWith {
		out = append(out, Share{UserID: u, Role: a.roleOf(u)})
	}
	return out
}

// view is the agent as the API shows it; providers names its fallbacks'
// providers.
func (a *agentRec) view(providers *table[*providerRec]) Agent {
	fbs := make([]Fallback, len(a.Fallbacks))
	for i, f := range a.Fallbacks {
		fbs[i] = Fallback{ProviderID: f.ProviderID, Model: f.Model}
		if p, ok := providers.rows[f.ProviderID]; ok {
			fbs[i].Provider = p.Name
		}
	}
	return Agent{
		ID: a.ID, AgentKey: a.AgentKey, DisplayName: a.DisplayName, OwnerID: a.OwnerID, ProviderID: a.ProviderID,
		Model: a.Model, SystemPrompt: a.SystemPrompt, Status: a.Status, SummonError: a.SummonError,
		OtherConfig: AgentOtherConfig{Description: a.Description, MaxTokens: a.MaxTokens}, TimeoutSeconds: a.TimeoutSeconds,
		MaxToolIterations: cmp.Or(a.MaxToolIterations, DefaultMaxToolIterations), IsDefault: a.IsDefault,
		SharedWith: orEmpty(a.SharedWith), Shares: a.shares(), Fallbacks: fbs, CreatedAt: a.CreatedAt, UpdatedAt: a.UpdatedAt,
	}
}

// runRec is one agent run (runRecorded v1, legacy type 69, snapshot
// traces). Fields after spans were added with traces (issue 12); older
// records lack them.
type runRec struct {
	ID            string    `json:"id"`
	AgentID       uuid.UUID `json:"agent_id"`
	UserID        string    `json:"user_id"`
	Endpoint      string    `json:"endpoint"`
	Status        string    `json:"status"`
	StartedAt     time.Time `json:"started_at"`
	DurationMs    int64     `json:"duration_ms"`
	Spans         []spanRec `json:"spans"`
	SessionKey    string    `json:"session_key,omitempty"`
	Channel       string    `json:"channel,omitempty"`
	Provider      string    `json:"provider,omitempty"`
	Model         string    `json:"model,omitempty"`
	Error         string    `json:"error,omitempty"`
	InputPreview  string    `json:"input_preview,omitempty"`
	OutputPreview string    `json:"output_preview,omitempty"`
	// ProviderType is the type of the provider that answered (absent in
	// records before native providers).
	ProviderType string `json:"provider_type,omitempty"`
	// APIKeyID is the gateway API key the run was called with (added with
	// prices: absent in older records, and for runs without a key).
	APIKeyID uuid.UUID `json:"api_key_id,omitzero"`
}

// spanRec is one timed step of a run.
type spanRec struct {
	Name             string    `json:"name"`
	Kind             string    `json:"kind"`
	StartedAt        time.Time `json:"started_at"`
	DurationMs       int64     `json:"duration_ms"`
	PromptTokens     int64     `json:"prompt_tokens"`
	CompletionTokens int64     `json:"completion_tokens"`
	Status           string    `json:"status"`
	Error            string    `json:"error,omitempty"`
	ID               string    `json:"id,omitempty"`
	ParentID         string    `json:"parent_id,omitempty"`
	Model            string    `json:"model,omitempty"`
	Provider         string    `json:"provider,omitempty"`
	InputPreview     string    `json:"input_preview,omitempty"`
	OutputPreview    string    `json:"output_preview,omitempty"`
	// Added with native providers; absent (zero) in older records.
	ProviderType     string `json:"provider_type,omitempty"`
	Attempt          int    `json:"attempt,omitempty"`
	CacheReadTokens  int64  `json:"cache_read_tokens,omitempty"`
	CacheWriteTokens int64  `json:"cache_write_tokens,omitempty"`
	ReasoningTokens  int64  `json:"reasoning_tokens,omitempty"`
	// Added with prices: the call's cost in nano-USD, and whether its
	// model had a price (absent: no call, or recorded before prices).
	CostNano   int64 `json:"cost_nano,omitempty"`
	PriceKnown *bool `json:"price_known,omitempty"`
}

// newRunRec is the record of t, times in UTC without a monotonic reading,
// so the live record equals the one decoded from the WAL.
func newRunRec(t Trace) *runRec {
	r := &runRec{
		ID: t.ID, AgentID: t.AgentID, UserID: t.UserID, Endpoint: t.Endpoint, Status: t.Status,
		StartedAt: t.StartedAt.UTC(), DurationMs: t.DurationMs, Spans: make([]spanRec, len(t.Spans)),
		SessionKey: t.SessionKey, Channel: t.Channel, Provider: t.Provider, Model: t.Model, Error: t.Error,
		InputPreview: t.InputPreview, OutputPreview: t.OutputPreview, ProviderType: t.ProviderType,
		APIKeyID: t.APIKeyID,
	}
	for i, s := range t.Spans {
		r.Spans[i] = spanRec{
			Name: s.Name, Kind: s.Kind, StartedAt: s.StartedAt.UTC(), DurationMs: s.DurationMs,
			PromptTokens: s.PromptTokens, CompletionTokens: s.CompletionTokens, Status: s.Status, Error: s.Error,
			ID: s.ID, ParentID: s.ParentID, Model: s.Model, Provider: s.Provider,
			InputPreview: s.InputPreview, OutputPreview: s.OutputPreview,
			ProviderType: s.ProviderType, Attempt: s.Attempt,
			CacheReadTokens: s.CacheReadTokens, CacheWriteTokens: s.CacheWriteTokens, ReasoningTokens: s.ReasoningTokens,
			CostNano: s.CostNano, PriceKnown: s.PriceKnown,
		}
	}
	return r
}

// view is the trace; withSpans false leaves Spans nil (lists).
func (r *runRec) view(withSpans bool) Trace {
	t := Trace{
		ID: r.ID, AgentID: r.AgentID, UserID: r.UserID, Endpoint: r.Endpoint, Status: r.Status,
		StartedAt: r.StartedAt, DurationMs: r.DurationMs, SessionKey: r.SessionKey, Channel: r.Channel,
		Provider: r.Provider, ProviderType: r.ProviderType, Model: r.Model, Error: r.Error,
		InputPreview: r.InputPreview, OutputPreview: r.OutputPreview, APIKeyID: r.APIKeyID,
	}
	t.CostNano, t.PriceKnown = r.cost()
	t.CostUSD = pricing.Nano(t.CostNano).USD()
	if !withSpans {
		return t
	}
	t.Spans = make([]Span, len(r.Spans))
	for i, s := range r.Spans {
		t.Spans[i] = Span{
			ID: s.ID, ParentID: s.ParentID, Name: s.Name, Kind: s.Kind, Model: s.Model, Provider: s.Provider,
			StartedAt: s.StartedAt, DurationMs: s.DurationMs, PromptTokens: s.PromptTokens, CompletionTokens: s.CompletionTokens,
			Status: s.Status, Error: s.Error, InputPreview: s.InputPreview, OutputPreview: s.OutputPreview,
			ProviderType: s.ProviderType, Attempt: s.Attempt,
			CacheReadTokens: s.CacheReadTokens, CacheWriteTokens: s.CacheWriteTokens, ReasoningTokens: s.ReasoningTokens,
			CostNano: s.CostNano, CostUSD: pricing.Nano(s.CostNano).USD(), PriceKnown: s.PriceKnown,
		}
		if t.Spans[i].ID == "" { // a run recorded before span ids
			t.Spans[i].ID = fmt.Sprintf("%s-%d", r.ID, i)
		}
	}
	return t
}

// usageRec is the usage of one (hour, agent, user, provider, model,
// provider type) (snapshot sections only: it is derived from runs); the
// three token kinds after CompletionTokens are parts of PromptTokens and
// CompletionTokens (see Span). Sections written
// before hourly usage hold day rows (Day set, Hour empty): they restore
// as the day's first hour.
type usageRec struct {
	Hour             string    `json:"hour,omitempty"` // 2006-01-02T15, UTC
	Day              string    `json:"day,omitempty"`  // legacy sections only
	AgentID          uuid.UUID `json:"agent_id"`
	UserID           string    `json:"user_id"`
	Provider         string    `json:"provider,omitempty"`
	ProviderType     string    `json:"provider_type,omitempty"`
	Model            string    `json:"model,omitempty"`
	Runs             int64     `json:"runs"`
	Errors           int64     `json:"errors,omitempty"`
	LLMCalls         int64     `json:"llm_calls,omitempty"`
	ToolCalls        int64     `json:"tool_calls,omitempty"`
	PromptTokens     int64     `json:"prompt_tokens"`
	CompletionTokens int64     `json:"completion_tokens"`
	DurationMs       int64     `json:"duration_ms,omitempty"`
	// Absent (zero) in sections written before native providers.
	CacheReadTokens  int64 `json:"cache_read_tokens,omitempty"`
	CacheWriteTokens int64 `json:"cache_write_tokens,omitempty"`
	ReasoningTokens  int64 `json:"reasoning_tokens,omitempty"`
	// Added with prices (absent, zero, before): the runs' cost in
	// nano-USD, their calls to models without a price, and the gateway
	// API key they were called with (part of the row's key).
	CostNano      int64     `json:"cost_nano,omitempty"`
	UnpricedCalls int64     `json:"unpriced_calls,omitempty"`
	APIKeyID      uuid.UUID `json:"api_key_id,omitzero"`
}
