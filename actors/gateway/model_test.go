package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/google/uuid"
)

// The command generator of TestLiveEqualsRestore and its model: what the
// gateway should hold after each command, so that each outcome (created,
// ErrExists, ErrInUse, ErrNotFound, ErrForbidden, ErrInvalid) is checked.

var (
	users     = []string{"alice", "bob", "carol"}
	provNames = []string{"p0", "p1", "p2", "p3", "p4"}
	agentKeys = []string{"a0", "a1", "a2", "a3", "a4", "a5", "a6", "a7"}
)

type model struct {
	providers map[uuid.UUID]*mProvider
	agents    map[uuid.UUID]*mAgent
	keys      []*mKey
	channels  map[uuid.UUID]uuid.UUID // channel instance → its agent
	sessions  map[string]*mSession    // by sessionName(user, key)
	memory    map[uuid.UUID]*mMemory
	skills    map[string]*mSkill    // by name
	grants    map[[2]uuid.UUID]bool // skill id, agent id
}

type mProvider struct {
	id   uuid.UUID
	name string
}

type mAgent struct {
	id         uuid.UUID
	key, owner string
	provider   uuid.UUID
	shared     []string
	fallback   uuid.UUID // its one fallback's provider (uuid.Nil: none)
}

type mKey struct {
	id      uuid.UUID
	raw     string
	revoked bool
	expires time.Time
}

func newModel() *model {
	return &model{providers: map[uuid.UUID]*mProvider{}, agents: map[uuid.UUID]*mAgent{}, channels: map[uuid.UUID]uuid.UUID{},
		sessions: map[string]*mSession{}, memory: map[uuid.UUID]*mMemory{}, skills: map[string]*mSkill{}, grants: map[[2]uuid.UUID]bool{}}
}

func (a *mAgent) visibleTo(u string) bool { return a.owner == u || slices.Contains(a.shared, u) }

func (m *model) providerNamed(name string) *mProvider {
	for _, p := range m.providers {
		if p.name == name {
			return p
		}
	}
	return nil
}

func (m *model) provider(ref string) *mProvider {
	if id, err := uuid.Parse(ref); err == nil && m.providers[id] != nil {
		return m.providers[id]
	}
	return m.providerNamed(ref)
}

func (m *model) agent(ref string) *mAgent {
	if id, err := uuid.Parse(ref); err == nil && m.agents[id] != nil {
		return m.agents[id]
	}
	for _, a := range m.agents {
		if a.key == ref {
			return a
		}
	}
	return nil
}

// otherIDs are the live ids of the kinds other than k, sorted.
func (m *model) otherIDs(k kind) []uuid.UUID {
	var ids []uuid.UUID
	if k != kindProvider {
		ids = slices.AppendSeq(ids, maps.Keys(m.providers))
	}
	if k != kindAgent {
		ids = slices.AppendSeq(ids, maps.Keys(m.agents))
	}
	slices.SortFunc(ids, func(a, b uuid.UUID) int { return bytes.Compare(a[:], b[:]) })
	return ids
}

func (m *model) inUse(id uuid.UUID) bool {
	for _, a := range m.agents {
		if a.provider == id || a.fallback == id {
			return true
		}
	}
	return false
}

func pick[T any](p *prop, xs []T) T { return xs[p.r.IntN(len(xs))] }

// step runs one random command and checks its outcome against the model.
func (p *prop) step() {
	switch x := p.r.IntN(146); {
	case x < 8:
		p.createProvider()
	case x < 16:
		p.updateProvider()
	case x < 24:
		p.deleteProvider()
	case x < 36:
		p.createAgent()
	case x < 46:
		p.updateAgent()
	case x < 56:
		p.deleteAgent()
	case x < 62:
		p.createKey()
	case x < 66:
		p.revokeKey()
	case x < 80:
		p.recordRun()
	case x < 83:
		p.createChannel()
	case x < 85:
		p.deleteChannel()
	case x < 87:
		p.createTool()
	case x < 90:
		p.saveMemory()
	case x < 92:
		p.mcpOps()
	case x < 93:
		p.n.Clock.Advance(time.Duration(1+p.r.IntN(30*60)) * time.Minute)
	default:
		p.stepMore(x - 93) // 0..52
	}
}

// expect checks err against the model's want; it reports success.
func (p *prop) expect(op string, err, want error) bool {
	p.t.Helper()
	if (want == nil) != (err == nil) || want != nil && !errors.Is(err, want) {
		p.t.Fatalf("%s = %v, the model expects %v", op, err, want)
	}
	return err == nil
}

// ref names a provider or agent by name or id, or something unknown.
func (p *prop) ref(name string, id uuid.UUID) string {
	switch p.r.IntN(10) {
	case 0:
		return "nope"
	case 1, 2, 3:
		return id.String()
	}
	return name
}

func (p *prop) providerInput(name string) ProviderInput {
	in := ProviderInput{Name: name, ProviderType: ProviderEcho, Enabled: p.r.IntN(2) == 0}
	if p.r.IntN(2) == 0 {
		in.ProviderType, in.APIBase = ProviderOpenAICompat, "http://127.0.0.1:1/v1/"
	}
	switch p.r.IntN(4) {
	case 0:
		in.APIKey = ptr("")
	case 1:
		in.APIKey = ptr(fmt.Sprintf("sk-secret-%d", p.r.IntN(1e6)))
	}
	switch p.r.IntN(4) { // the key pool: kept, cleared or set
	case 0:
		in.APIKeys = &[]string{}
	case 1:
		in.APIKeys = &[]string{fmt.Sprintf("sk-pool-%d", p.r.IntN(1e6)), "short"}
	}
	in.Settings = pick(p, []json.RawMessage{nil, json.RawMessage(`{ "delay_ms" : 5, "note": "<b>&" }`), json.RawMessage(` null `)})
	if p.r.IntN(3) == 0 {
		in.DisplayName = "Display " + name
	}
	return in
}

// anyOf picks a value of m in a seeded order (maps iterate at random).
func anyOf[V any](p *prop, m map[uuid.UUID]V) (V, bool) {
	var zero V
	if len(m) == 0 {
		return zero, false
	}
	ids := slices.SortedFunc(maps.Keys(m), func(a, b uuid.UUID) int { return bytes.Compare(a[:], b[:]) })
	return m[pick(p, ids)], true
}

func (p *prop) anyProvider() (string, uuid.UUID) {
	if pr, ok := anyOf(p, p.m.providers); ok {
		return pr.name, pr.id
	}
	return "nope", uuid.Nil
}

func (p *prop) createProvider() {
	name := pick(p, provNames)
	var want error
	if p.m.providerNamed(name) != nil {
		want = ErrExists
	}
	pr, err := p.gw.CreateProvider(p.actx(), p.providerInput(name))
	if p.expect("CreateProvider "+name, err, want) {
		p.m.providers[pr.ID] = &mProvider{id: pr.ID, name: name}
	}
}

func (p *prop) updateProvider() {
	ref := p.ref(p.anyProvider())
	name := pick(p, provNames)
	cur, other := p.m.provider(ref), p.m.providerNamed(name)
	var want error
	switch {
	case cur == nil:
		want = ErrNotFound
	case other != nil && other != cur:
		want = ErrExists
	}
	if _, err := p.gw.UpdateProvider(p.actx(), ref, p.providerInput(name)); p.expect("UpdateProvider "+ref, err, want) {
		cur.name = name
	}
}

func (p *prop) deleteProvider() {
	ref := p.ref(p.anyProvider())
	cur := p.m.provider(ref)
	var want error
	switch {
	case cur == nil:
		want = ErrNotFound
	case p.m.inUse(cur.id):
		want = ErrInUse
	}
	if p.expect("DeleteProvider "+ref, p.gw.DeleteProvider(p.actx(), ref), want) {
		delete(p.m.providers, cur.id)
	}
}

// shared draws a shared_with list: nil (keep), empty or some users.
func (p *prop) shared() *[]string {
	if p.r.IntN(3) == 0 {
		return nil
	}
	var sw []string
	for _, u := range users {
		if p.r.IntN(3) == 0 {
			sw = append(sw, u, u) // duplicates are dropped
		}
	}
	if sw == nil {
		sw = []string{}
	}
	return &sw
}

func sortedUnique(sw []string) []string {
	out := slices.Compact(slices.Sorted(slices.Values(sw)))
	if len(out) == 0 {
		return nil
	}
	return out
}

func (p *prop) createAgent() {
	user, key := pick(p, users), pick(p, agentKeys)
	provRef := p.ref(p.anyProvider())
	in := AgentInput{AgentKey: &key, Provider: &provRef, Model: ptr("m"), SharedWith: p.shared()}
	prov := p.m.provider(provRef)
	var want error
	switch {
	case p.m.agent(key) != nil:
		want = ErrExists
	case prov == nil:
		want = ErrInvalid
	}
	a, err := p.gw.CreateAgent(p.actx(), user, in)
	if p.expect("CreateAgent "+key, err, want) {
		ma := &mAgent{id: a.ID, key: key, owner: user, provider: prov.id}
		if in.SharedWith != nil {
			ma.shared = sortedUnique(*in.SharedWith)
		}
		p.m.agents[a.ID] = ma
	}
}

func (p *prop) anyAgent() (string, uuid.UUID) {
	if a, ok := anyOf(p, p.m.agents); ok {
		return a.key, a.id
	}
	return "nope", uuid.Nil
}

// ownedAgent is the model's answer to a change of agent ref by user.
func (p *prop) ownedAgent(ref, user string) (*mAgent, error) {
	a := p.m.agent(ref)
	switch {
	case a == nil || !a.visibleTo(user):
		return nil, ErrNotFound
	case a.owner != user:
		return nil, ErrForbidden
	}
	return a, nil
}

func (p *prop) updateAgent() {
	user, ref := pick(p, users), p.ref(p.anyAgent())
	in := AgentInput{SharedWith: p.shared(), Model: ptr(pick(p, []string{"m", "m2"}))}
	if p.r.IntN(3) == 0 {
		in.AgentKey = ptr(pick(p, agentKeys))
	}
	var prov, fb *mProvider
	if p.r.IntN(3) == 0 {
		in.Provider = ptr(p.ref(p.anyProvider()))
		prov = p.m.provider(*in.Provider)
	}
	if p.r.IntN(3) == 0 { // fallbacks: cleared, or one (model "fb": never the primary's)
		fbs := []FallbackInput{}
		if p.r.IntN(2) == 0 {
			fbs = append(fbs, FallbackInput{Provider: p.ref(p.anyProvider()), Model: "fb"})
			fb = p.m.provider(fbs[0].Provider)
		}
		in.Fallbacks = &fbs
	}
	a, want := p.ownedAgent(ref, user)
	switch {
	case want != nil:
	case in.AgentKey != nil && p.m.agent(*in.AgentKey) != nil && p.m.agent(*in.AgentKey) != a:
		want = ErrExists
	case in.Provider != nil && prov == nil:
		want = ErrInvalid
	case in.Fallbacks != nil && len(*in.Fallbacks) == 1 && fb == nil:
		want = ErrInvalid
	}
	if _, err := p.gw.UpdateAgent(p.actx(), user, ref, in); p.expect("UpdateAgent "+ref+" by "+user, err, want) {
		if in.AgentKey != nil {
			a.key = *in.AgentKey
		}
		if prov != nil {
			a.provider = prov.id
		}
		if in.Fallbacks != nil {
			a.fallback = uuid.Nil
			if fb != nil {
				a.fallback = fb.id
			}
		}
		if in.SharedWith != nil {
			a.shared = sortedUnique(*in.SharedWith)
		}
	}
}

func (p *prop) deleteAgent() {
	user, ref := pick(p, users), p.ref(p.anyAgent())
	a, want := p.ownedAgent(ref, user)
	if want == nil && slices.Contains(slices.Collect(maps.Values(p.m.channels)), a.id) {
		want = ErrInUse // a channel instance runs it
	}
	if p.expect("DeleteAgent "+ref+" by "+user, p.gw.DeleteAgent(p.actx(), user, ref), want) {
		p.m.dropAgent(a.id)
	}
}

func (p *prop) createKey() {
	n := NewAPIKey{Name: "k", Scopes: []Scope{pick(p, []Scope{ScopeRead, ScopeWrite, ScopeAdmin}), ScopeRead}}
	if p.r.IntN(2) == 0 {
		n.ExpiresIn = time.Duration(1+p.r.IntN(3)) * time.Hour
	}
	if p.r.IntN(4) != 0 {
		n.UserID = pick(p, users)
	}
	var want error
	if n.UserID == "" && n.Scopes[0] != ScopeAdmin {
		want = ErrInvalid // a read or write key acts for one user
	}
	k, raw, err := p.gw.CreateAPIKey(p.actx(), n)
	if p.expect("CreateAPIKey", err, want) && want == nil {
		p.m.keys = append(p.m.keys, &mKey{id: k.ID, raw: raw, expires: k.ExpiresAt})
	}
}

func (p *prop) revokeKey() {
	var k *mKey
	var id uuid.UUID
	for i := range id {
		id[i] = byte(p.r.Uint32())
	}
	var want error = ErrNotFound
	if len(p.m.keys) > 0 && p.r.IntN(5) > 0 {
		k = pick(p, p.m.keys)
		id, want = k.id, nil
	}
	if p.expect("RevokeAPIKey", p.gw.RevokeAPIKey(p.actx(), id), want) {
		k.revoked = true
	}
}

func (p *prop) recordRun() {
	_, agent := p.anyAgent()
	at := p.n.Clock.Now().Add(time.Duration(p.r.IntN(1000)) * time.Millisecond)
	t := Trace{
		ID: fmt.Sprintf("run-%d", p.r.Uint64()), AgentID: agent, UserID: pick(p, users), Endpoint: "chat",
		Status: pick(p, []string{RunOK, RunFailed, RunTimeout}), StartedAt: at.In(time.FixedZone("X", 3600)), DurationMs: int64(p.r.IntN(5000)),
		SessionKey: pick(p, []string{"", "s1"}), Channel: pick(p, []string{"http", "ws"}), Provider: pick(p, []string{"echo", "stub"}),
		Model: pick(p, []string{"m1", "m2"}), InputPreview: "in", OutputPreview: "out",
	}
	for i := range p.r.IntN(3) {
		t.Spans = append(t.Spans, Span{ID: fmt.Sprint(i), Name: "call", Kind: pick(p, []string{SpanLLM, SpanTool}), StartedAt: at,
			PromptTokens: int64(p.r.IntN(100)), CompletionTokens: int64(p.r.IntN(50)), Status: t.Status, Model: t.Model})
	}
	p.gw.RecordRun(t)
}

// actx is the context of one operation: half of them made by an API
// caller, whose changes are audited.
func (p *prop) actx() context.Context {
	c := ctx(p.t)
	if p.r.IntN(2) == 0 {
		return c
	}
	return WithActor(c, Actor{Type: pick(p, []string{ActorToken, ActorAPIKey}), ID: "k1", UserID: pick(p, users), IP: "127.0.0.1"})
}

func (p *prop) createChannel() {
	_, agent := p.anyAgent()
	in := ChannelInput{Name: ptr(fmt.Sprintf("ch-%d", p.r.IntN(1000))), ChannelType: ptr(ChannelWebhook), Agent: ptr(agent.String()),
		Credentials: map[string]string{"secret": "0123456789abcdef-secret"}}
	if p.r.IntN(2) == 0 {
		in.Config = json.RawMessage(`{"async":true,"callback_url":"http://127.0.0.1:9/cb"}`)
	}
	c, err := p.gw.CreateChannel(p.actx(), in)
	switch {
	case err == nil:
		p.m.channels[c.ID] = agent
	case agent == uuid.Nil && errors.Is(err, ErrNotFound), errors.Is(err, ErrExists):
	default:
		p.t.Fatalf("CreateChannel = %v", err)
	}
}

func (p *prop) deleteChannel() {
	for id := range p.m.channels {
		if err := p.gw.DeleteChannel(p.actx(), id.String()); err != nil {
			p.t.Fatalf("DeleteChannel = %v", err)
		}
		delete(p.m.channels, id)
		return
	}
}

func (p *prop) createTool() {
	_, agent := p.anyAgent()
	in := CustomToolInput{Name: ptr(fmt.Sprintf("t%d", p.r.IntN(1000))), Command: []string{"cat"}, Env: map[string]string{"K": "v"}}
	if p.r.IntN(2) == 0 {
		in.AgentID = ptr(agent.String())
	}
	_, err := p.gw.CreateCustomTool(p.actx(), in)
	if err != nil && !errors.Is(err, ErrExists) && !(agent == uuid.Nil && errors.Is(err, ErrNotFound)) {
		p.t.Fatalf("CreateCustomTool = %v", err)
	}
}

func (p *prop) saveMemory() {
	_, agent := p.anyAgent()
	in := MemoryInput{Content: pick(p, []string{"tea", "coffee please", "green tea"}), UserID: pick(p, append(users, ""))}
	if p.r.IntN(2) == 0 && agent != uuid.Nil {
		in.Agent = agent.String()
	}
	e, err := p.gw.SaveMemory(p.actx(), in)
	if err != nil {
		p.t.Fatalf("SaveMemory = %v", err)
	}
	mm := &mMemory{user: in.UserID}
	if e.AgentID != nil {
		mm.agent = *e.AgentID
	}
	p.m.memory[e.ID] = mm
	if p.r.IntN(3) == 0 {
		if _, err := p.gw.RecordDelegation(p.actx(), Delegation{SourceAgentID: agent, TargetAgentID: agent, UserID: in.UserID,
			Task: in.Content, Status: RunOK, CreatedAt: p.n.Clock.Now(), CompletedAt: p.n.Clock.Now()}); err != nil {
			p.t.Fatalf("RecordDelegation = %v", err)
		}
	}
}

func (p *prop) mcpOps() {
	name := fmt.Sprintf("mcp%d", p.r.IntN(3))
	if _, err := p.gw.CreateMCPServer(p.actx(), MCPServerInput{Name: ptr(name), Transport: ptr(MCPStreamable),
		URL: ptr("http://127.0.0.1:9/mcp"), Headers: map[string]string{"Authorization": "Bearer x"}}); err != nil && !errors.Is(err, ErrExists) {
		p.t.Fatalf("CreateMCPServer = %v", err)
	}
	user := pick(p, users)
	_, agent := p.anyAgent()
	switch p.r.IntN(4) {
	case 0:
		if _, err := p.gw.GrantMCP(p.actx(), name, GrantUser, user, []string{"echo"}, nil); err != nil {
			p.t.Fatalf("GrantMCP = %v", err)
		}
	case 1:
		if _, err := p.gw.GrantMCP(p.actx(), name, GrantAgent, agent.String(), nil, []string{"x"}); err != nil && agent != uuid.Nil {
			p.t.Fatalf("GrantMCP agent = %v", err)
		}
	case 2:
		q, err := p.gw.RequestMCP(p.actx(), user, name, "", "please")
		if err != nil {
			p.t.Fatalf("RequestMCP = %v", err)
		}
		if _, err := p.gw.ReviewMCP(p.actx(), q.ID, p.r.IntN(2) == 0, "ok", "admin"); err != nil {
			p.t.Fatalf("ReviewMCP = %v", err)
		}
	case 3:
		if _, err := p.gw.DeleteMCPServer(p.actx(), name); err != nil {
			p.t.Fatalf("DeleteMCPServer = %v", err)
		}
	}
}
