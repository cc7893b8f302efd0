package gateway

import (
	"bytes"
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
)

// state is the gateway's whole durable state, partitioned by the actor that
// owns each part once the gateway runs: keys[i] belongs to key shard i,
// reg to the registry actor, runs to the runs actor.
//
// apply is the only code that changes it, and it is pure and
// deterministic. Before Start, restore (snapshot entities, then the WAL)
// calls state.apply, which routes each event to its part; after Start each
// actor calls its own part's apply with the events it appends (commit), so
// live changes and replay run the same code.
type state struct {
	keys    []*keyPart
	homes   keyHomes
	reg     *registryPart
	runs    *runState
	tenants []*tenantPart
}

// part is one actor's share of the state.
type part interface {
	apply(seq uint64, ev event)
}

func newState(cfg Config) *state {
	st := &state{
		keys:  make([]*keyPart, cfg.KeyShards),
		homes: keyHomes{n: cfg.KeyShards, moved: map[uuid.UUID]int{}},
		reg:   newRegistryPart(cfg.MaxActivity),
		runs:  newRunState(cfg.MaxTraces, cfg.TraceDays, cfg.UsageDays),
	}
	for i := range st.keys {
		st.keys[i] = newKeyPart(cfg.MaxActivity)
	}
	st.tenants = make([]*tenantPart, cfg.TenantShards)
	for i := range st.tenants {
		st.tenants[i] = newTenantPart(cfg.MaxActivity)
	}
	return st
}

// apply routes ev to the part that owns it; seq is its WAL index (0 for a
// snapshot's entities). Live, Gateway.ApplyLive routes a record another
// node wrote by the same route, to the actor owning that part.
func (st *state) apply(seq uint64, ev event) {
	d := route(ev, st.homes, len(st.tenants))
	switch e := ev.(type) {
	case entitySaved:
		if k, ok := e.ent.(*apiKeyRec); ok {
			st.homes.place(k)
		}
	case entityDeleted:
		if e.kind == kindAPIKey {
			delete(st.homes.moved, e.id)
		}
	}
	st.part(d).apply(seq, ev)
}

// dest is where an event goes: the actor (and so the part of the state)
// that applies it.
type dest struct {
	to destKind
	i  int // the key shard or tenant shard (toKeys, toTenant)
	// k and id name the entity of a toHolder event: the tenant shard
	// holding it applies it (a delete or a turn names no routing key).
	k  kind
	id uuid.UUID
}

type destKind uint8

const (
	toKeys     destKind = iota + 1 // key shard i
	toRegistry                     // the registry
	toTenant                       // tenant shard i
	toHolder                       // the tenant shard holding k/id, if any
	toRuns                         // the runs actor
)

// route is the one routing rule of events, for replay (state.apply) and
// live (Gateway.ApplyLive): it depends only on the event, the key homes and
// the number of tenant shards.
func route(ev event, homes keyHomes, tenants int) dest {
	switch e := ev.(type) {
	case entitySaved:
		k, id := e.ent.ref()
		return routeEntity(k, id, e.ent, homes, tenants)
	case entityDeleted:
		return routeEntity(e.kind, e.id, nil, homes, tenants)
	case runRecorded:
		return dest{to: toRuns}
	case sessionTurnAppended:
		return dest{to: toHolder, k: kindSession, id: e.turn.SessionID}
	case budgetReserved:
		return dest{to: toTenant, i: tenantOf(budgetTenant(e.Budget), tenants)}
	case budgetSettled:
		return dest{to: toTenant, i: tenantOf(budgetTenant(e.Budget), tenants)}
	}
	panic(fmt.Sprintf("gateway: no part applies %T", ev))
}

// routeEntity is the dest of a save (ent: the entity's new state) or a
// delete (ent nil) of entity k/id.
func routeEntity(k kind, id uuid.UUID, ent entity, homes keyHomes, tenants int) dest {
	switch kinds[k].owner {
	case ownerKeys:
		if key, ok := ent.(*apiKeyRec); ok {
			return dest{to: toKeys, i: shardOf(key.Hash, homes.n)}
		}
		return dest{to: toKeys, i: homes.of(id)}
	case ownerRegistry:
		return dest{to: toRegistry}
	case ownerTenant:
		switch x := ent.(type) {
		case *sessionRec:
			return dest{to: toTenant, i: tenantOf(sessionTenant(x.UserID), tenants)}
		case *memoryRec:
			return dest{to: toTenant, i: tenantOf(memoryTenant(x.UserID), tenants)}
		case *ledgerRec:
			return dest{to: toTenant, i: tenantOf(budgetTenant(x.ID), tenants)}
		}
		return dest{to: toHolder, k: k, id: id}
	case ownerEntity:
		a, _ := ent.(*activityRec)
		switch {
		case a != nil && a.Tenant != "":
			return dest{to: toTenant, i: tenantOf(a.Tenant, tenants)}
		case a != nil && kind(a.EntityType) == kindAPIKey:
			if id, err := uuid.Parse(a.EntityID); err == nil {
				return dest{to: toKeys, i: homes.of(id)}
			}
		}
		return dest{to: toRegistry}
	}
	panic(fmt.Sprintf("gateway: kind %q has no owner", k))
}

// part is the part of the state d names.
func (st *state) part(d dest) part {
	switch d.to {
	case toKeys:
		return st.keys[d.i]
	case toRegistry:
		return st.reg
	case toTenant:
		return st.tenants[d.i]
	case toHolder:
		if p := st.tenantHolding(d.k, d.id); p != nil {
			return p
		}
		return noPart{} // a delete of what is gone, a turn of a deleted session
	case toRuns:
		return st.runs
	}
	panic(fmt.Sprintf("gateway: no part for dest %d", d.to))
}

// tenantHolding is the tenant part holding entity k/id, or nil.
func (st *state) tenantHolding(k kind, id uuid.UUID) *tenantPart {
	for _, p := range st.tenants {
		if p.holds(k, id) {
			return p
		}
	}
	return nil
}

// noPart applies nothing: the owner of a delete whose entity is gone.
type noPart struct{}

func (noPart) apply(uint64, event) {}

// entities appends every entity of the state to dst.
func (st *state) entities(dst []entity) []entity {
	for _, p := range st.keys {
		dst = p.entities(dst)
	}
	for _, p := range st.tenants {
		dst = p.entities(dst)
	}
	return st.reg.entities(dst)
}

// keyHomes says which key shard holds a key id. This build draws a key's
// id so that shardOfID(id) is the shard of its hash; keys restored from
// older data dirs (random ids), or after KeyShards changed, sit on their
// hash's shard too and are listed in moved. moved is built by restore and
// read-only once the gateway runs: live creates never add to it.
type keyHomes struct {
	n     int
	moved map[uuid.UUID]int
}

func (h keyHomes) of(id uuid.UUID) int {
	if i, ok := h.moved[id]; ok {
		return i
	}
	return shardOfID(id, h.n)
}

// place returns k's shard and records it if its id maps elsewhere.
func (h keyHomes) place(k *apiKeyRec) int {
	i := shardOf(k.Hash, h.n)
	if shardOfID(k.ID, h.n) != i {
		h.moved[k.ID] = i
	}
	return i
}

func shardOf(h [32]byte, n int) int {
	return int(uint32(h[0])<<24|uint32(h[1])<<16|uint32(h[2])<<8|uint32(h[3])) % n
}

func shardOfID(id uuid.UUID, n int) int {
	return int(uint32(id[0])<<24|uint32(id[1])<<16|uint32(id[2])<<8|uint32(id[3])) % n
}

// keyPart is one key shard's keys, by id and by SHA-256 of the raw key.
type keyPart struct {
	byID     map[uuid.UUID]*apiKeyRec
	byHash   map[[32]byte]*apiKeyRec
	activity activityLog // the audit entries of its keys' changes
	live     liveMarks   // cluster mode: this node's latest writes (live.go)
}

func newKeyPart(maxActivity int) *keyPart {
	return &keyPart{byID: map[uuid.UUID]*apiKeyRec{}, byHash: map[[32]byte]*apiKeyRec{}, activity: newActivityLog(maxActivity)}
}

func (p *keyPart) apply(_ uint64, ev event) {
	switch e := ev.(type) {
	case entitySaved:
		if a, ok := e.ent.(*activityRec); ok {
			p.activity.save(a)
			return
		}
		k := e.ent.(*apiKeyRec)
		if old := p.byID[k.ID]; old != nil {
			delete(p.byHash, old.Hash)
		}
		p.byID[k.ID], p.byHash[k.Hash] = k, k
	case entityDeleted:
		if old := p.byID[e.id]; old != nil {
			delete(p.byHash, old.Hash)
			delete(p.byID, e.id)
		}
	default:
		panic(fmt.Sprintf("gateway: key part cannot apply %T", ev))
	}
}

func (p *keyPart) entities(dst []entity) []entity { return p.activity.appendTo(p.keys(dst)) }

// keys appends the part's API keys to dst.
func (p *keyPart) keys(dst []entity) []entity {
	for _, k := range p.byID {
		dst = append(dst, k)
	}
	return dst
}

// registryPart holds providers and agents with their indexes: provider
// name → id, agent_key → id, and how many agents use each provider.
type registryPart struct {
	providers     table[*providerRec]
	agents        table[*agentRec]
	agentsOn      map[uuid.UUID]int
	userFiles     table[*userFileRec]
	activity      activityLog           // the audit entries of its changes
	channels      table[*channelRec]    // by id, and by name
	tools         table[*customToolRec] // by id, and by name
	delegations   recentLog[*delegationRec]
	mcpServers    table[*mcpServerRec] // by id, and by name
	mcpGrants     table[*mcpGrantRec]
	mcpRequests   table[*mcpRequestRec]
	media         table[*mediaRec]
	skills        table[*skillRec] // by id, and by slug
	skillVersions table[*skillVersionRec]
	skillGrants   table[*skillGrantRec]
	budgets       table[*budgetRec] // by id, and by subject and period (budget.go)
	// tables are the tables above by the kind they hold, except agents
	// (apply keeps agentsOn with them).
	tables map[kind]anyTable
	// version counts applied events; the registry publishes a new view
	// when it moved. agentsOnShared: a view holds agentsOn.
	version        uint64
	agentsOnShared bool
	live           liveMarks // cluster mode: this node's latest writes (live.go); views never read it
}

func newRegistryPart(maxActivity int) *registryPart {
	r := &registryPart{
		providers:     newTable(func(p *providerRec) string { return p.Name }),
		agents:        newTable(func(a *agentRec) string { return a.AgentKey }),
		agentsOn:      map[uuid.UUID]int{},
		userFiles:     newTable[*userFileRec](nil),
		activity:      newActivityLog(maxActivity),
		channels:      newTable(func(c *channelRec) string { return c.Name }),
		tools:         newTable(func(t *customToolRec) string { return t.Name }),
		delegations:   newRecentLog[*delegationRec](maxActivity),
		mcpServers:    newTable(func(s *mcpServerRec) string { return s.Name }),
		mcpGrants:     newTable[*mcpGrantRec](nil),
		mcpRequests:   newTable[*mcpRequestRec](nil),
		media:         newTable[*mediaRec](nil),
		skills:        newTable(func(s *skillRec) string { return s.Slug }),
		skillVersions: newTable[*skillVersionRec](nil),
		skillGrants:   newTable[*skillGrantRec](nil),
		budgets:       newTable(budgetName),
	}
	r.bindTables()
	return r
}

// bindTables points tables at r's own tables.
func (r *registryPart) bindTables() {
	r.tables = map[kind]anyTable{
		kindProvider: &r.providers, kindUserFile: &r.userFiles,
		kindChannel: &r.channels, kindCustomTool: &r.tools,
		kindMCPServer: &r.mcpServers, kindMCPGrant: &r.mcpGrants, kindMCPRequest: &r.mcpRequests,
		kindMedia: &r.media, kindSkill: &r.skills, kindSkillVersion: &r.skillVersions, kindSkillGrant: &r.skillGrants,
		kindBudget: &r.budgets,
	}
}

// freeze returns an immutable copy of the part, the view readers use: it
// shares every table with r, and marks them shared so that r's next write
// to one copies it first. A view costs O(kinds); a write after a publish
// costs a copy of the table it changes.
func (r *registryPart) freeze() *registryPart {
	for _, t := range r.tables {
		t.share()
	}
	r.agents.share()
	r.activity.share()
	r.delegations.share()
	r.agentsOnShared = true
	v := *r
	v.bindTables()
	return &v
}

// useProvider adds d to the count of agents using provider id.
func (r *registryPart) useProvider(id uuid.UUID, d int) {
	if r.agentsOnShared {
		r.agentsOn, r.agentsOnShared = maps.Clone(r.agentsOn), false
	}
	if r.agentsOn[id] += d; r.agentsOn[id] <= 0 {
		delete(r.agentsOn, id)
	}
}

func (r *registryPart) apply(seq uint64, ev event) {
	r.version++
	switch e := ev.(type) {
	case entitySaved:
		switch x := e.ent.(type) {
		case *agentRec:
			r.unuse(r.agents.save(x))
			r.useProvider(x.ProviderID, 1)
		case *activityRec:
			r.activity.save(x)
		case *delegationRec:
			r.delegations.save(x)
		default:
			k, _ := x.ref()
			t, ok := r.tables[k]
			if !ok {
				panic(fmt.Sprintf("gateway: registry cannot save %T", x))
			}
			t.put(x)
		}
	case entityDeleted:
		if e.kind == kindAgent {
			r.unuse(r.agents.drop(e.id))
			return
		}
		t, ok := r.tables[e.kind]
		if !ok {
			panic(fmt.Sprintf("gateway: registry cannot delete %q", e.kind))
		}
		t.del(e.id)
	default:
		panic(fmt.Sprintf("gateway: registry cannot apply %T", ev))
	}
}

// unuse drops a replaced or deleted agent's use of its provider.
func (r *registryPart) unuse(a *agentRec, ok bool) {
	if ok {
		r.useProvider(a.ProviderID, -1)
	}
}

func (r *registryPart) entities(dst []entity) []entity {
	dst = r.delegations.appendTo(r.activity.appendTo(r.agents.appendTo(dst)))
	for _, t := range r.tables {
		dst = t.appendTo(dst)
	}
	return dst
}

// runState holds the bounded traces, the hourly usage rollup and the
// instances, all derived from run records.
type runState struct {
	seq       uint64 // highest run record reflected
	live      uint64 // highest run record of another node applied live (applyLive)
	maxTraces int
	traceDays int
	usageDays int
	traces    []*runRec // oldest first, at most maxTraces, none older than traceDays
	usage     map[usageKey]*usageRec
	newestRun time.Time // the newest run's start: retention counts back from it
	// instances are the (agent, user) pairs that ran, derived from the run
	// records like usage, but never pruned: one per pair.
	instances map[instanceKey]*instanceRec
}

type instanceKey struct {
	agent uuid.UUID
	user  string
}

// instanceRec is one agent's instance for one user: created by the
// user's first run, CreatedAt the start of the earliest (the same in
// whatever order runs are applied: a node in a cluster applies its own
// before the others').
type instanceRec struct {
	AgentID   uuid.UUID `json:"agent_id"`
	UserID    string    `json:"user_id"`
	CreatedAt time.Time `json:"created_at"`
	LastRunAt time.Time `json:"last_run_at"`
	Runs      int64     `json:"runs"`
}

type usageKey struct {
	hour            string // 2006-01-02T15
	agent           uuid.UUID
	user            string
	provider, model string
	// provType is the answering provider's type ("" in runs and sections
	// before native providers): a provider whose type changed counts
	// apart, so a row's type is exact whatever order runs apply in.
	provType string
	apiKey   uuid.UUID // the calling gateway API key (nil: none, or before prices)
}

// hourLayout formats usage hours (UTC).
const hourLayout = "2006-01-02T15"

func newRunState(maxTraces, traceDays, usageDays int) *runState {
	return &runState{maxTraces: maxTraces, traceDays: traceDays, usageDays: usageDays,
		usage: map[usageKey]*usageRec{}, instances: map[instanceKey]*instanceRec{}}
}

// apply records a run, its usage and its instance unless seq is already
// reflected (replay: the records come in log order, so the part's
// watermark seq tells). Retention depends only on the records (the newest
// run seen), so replay is exact.
func (rs *runState) apply(seq uint64, ev event) {
	if reflects(rs.seq, seq) {
		return
	}
	rs.add(seq, ev.(runRecorded).run)
}

// applyLive records a run another node logged (cluster mode) unless it is
// already reflected. Those records come in log order, but interleaved
// with this node's own runs, which the runs actor adds as their commits
// land (add, never skipped: each commit lands once): a foreign run may
// have a lower seq than an own run already added, so the foreign runs
// have their own watermark, live, which starts at seq when the actors
// start (everything replayed or restored until then is reflected).
func (rs *runState) applyLive(seq uint64, ev event) {
	if reflects(rs.live, seq) {
		return
	}
	rs.live = seq
	rs.add(seq, ev.(runRecorded).run)
}

// add records run t logged at seq (0: a snapshot's trace) and raises the
// part's watermark to it.
func (rs *runState) add(seq uint64, t *runRec) {
	rs.seq = max(rs.seq, seq)
	rs.traces = append(rs.traces, t)
	if over := len(rs.traces) - rs.maxTraces; over > 0 {
		rs.dropOldest(over)
	}
	rs.count(t)
	if t.UserID != "" {
		ik := instanceKey{t.AgentID, t.UserID}
		in := rs.instances[ik]
		if in == nil {
			in = &instanceRec{AgentID: t.AgentID, UserID: t.UserID, CreatedAt: t.StartedAt.UTC()}
			rs.instances[ik] = in
		}
		in.Runs++
		if t.StartedAt.Before(in.CreatedAt) { // its earliest run, in whatever order runs come (cluster mode)
			in.CreatedAt = t.StartedAt.UTC()
		}
		if t.StartedAt.After(in.LastRunAt) {
			in.LastRunAt = t.StartedAt.UTC()
		}
	}
	if t.StartedAt.After(rs.newestRun) {
		rs.newestRun = t.StartedAt.UTC()
		rs.prune()
	}
}

// dropOldest drops the n oldest traces by moving the start of the slice,
// never by moving its elements: a published view (runsActor.publish) is a
// slice header over the same array, so appends (at the end) and drops (of
// the start) never change what it holds (which is why the dropped slots are
// not cleared: a view may still show them). The array is copied, live part
// only, when an append outgrows it, and the dropped runs go with the old
// one.
func (rs *runState) dropOldest(n int) { rs.traces = rs.traces[n:] }

// count adds t to its usage row.
func (rs *runState) count(t *runRec) {
	k := usageKey{t.StartedAt.UTC().Format(hourLayout), t.AgentID, t.UserID, t.Provider, t.Model, t.ProviderType, t.APIKeyID}
	u := rs.usage[k]
	if u == nil {
		u = &usageRec{Hour: k.hour, AgentID: t.AgentID, UserID: t.UserID, Provider: t.Provider, ProviderType: t.ProviderType, Model: t.Model,
			APIKeyID: t.APIKeyID}
		rs.usage[k] = u
	}
	u.Runs++
	if t.Status != RunOK {
		u.Errors++
	}
	u.DurationMs += t.DurationMs
	for _, sp := range t.Spans {
		u.PromptTokens += sp.PromptTokens
		u.CompletionTokens += sp.CompletionTokens
		u.CacheReadTokens += sp.CacheReadTokens
		u.CacheWriteTokens += sp.CacheWriteTokens
		u.ReasoningTokens += sp.ReasoningTokens
		u.CostNano = satAdd(u.CostNano, sp.CostNano)
		if sp.PriceKnown != nil && !*sp.PriceKnown {
			u.UnpricedCalls++
		}
		switch sp.Kind {
		case SpanLLM:
			u.LLMCalls++
		case SpanTool:
			u.ToolCalls++
		}
	}
}

// prune drops usage rows of hours before the usageDays UTC days that end
// with the newest run's, and traces older than traceDays before it.
func (rs *runState) prune() {
	if rs.newestRun.IsZero() {
		return
	}
	day := rs.newestRun.Truncate(24 * time.Hour)
	cut := day.AddDate(0, 0, -rs.usageDays+1).Format(hourLayout)
	for k := range rs.usage {
		if k.hour < cut {
			delete(rs.usage, k)
		}
	}
	if rs.traceDays > 0 {
		oldest := rs.newestRun.Add(-time.Duration(rs.traceDays) * 24 * time.Hour)
		n := 0
		for n < len(rs.traces) && rs.traces[n].StartedAt.Before(oldest) {
			n++
		}
		if n > 0 {
			rs.dropOldest(n)
		}
	}
}

// runsImage is a copy of the runs part for a snapshot.
type runsImage struct {
	seq       uint64
	traces    []*runRec
	usage     []usageRec    // by day, agent, user
	instances []instanceRec // by agent, user
}

func (rs *runState) image() runsImage {
	im := runsImage{seq: rs.seq, traces: slices.Clone(rs.traces), usage: make([]usageRec, 0, len(rs.usage))}
	for _, u := range rs.usage {
		im.usage = append(im.usage, *u)
	}
	slices.SortFunc(im.usage, cmpUsage)
	im.instances = make([]instanceRec, 0, len(rs.instances))
	for _, in := range rs.instances {
		im.instances = append(im.instances, *in)
	}
	slices.SortFunc(im.instances, cmpInstance)
	return im
}

func cmpInstance(x, y instanceRec) int {
	if c := bytes.Compare(x.AgentID[:], y.AgentID[:]); c != 0 {
		return c
	}
	return strings.Compare(x.UserID, y.UserID)
}

// restore replaces the runs part with a snapshot's, trimmed to this
// build's limits.
func (rs *runState) restore(im runsImage) {
	rs.seq, rs.traces = im.seq, im.traces
	if over := len(rs.traces) - rs.maxTraces; over > 0 {
		rs.dropOldest(over)
	}
	clear(rs.usage)
	clear(rs.instances)
	rs.newestRun = time.Time{}
	for _, t := range rs.traces {
		if t.StartedAt.After(rs.newestRun) {
			rs.newestRun = t.StartedAt.UTC()
		}
	}
	for i := range im.instances {
		in := im.instances[i]
		rs.instances[instanceKey{in.AgentID, in.UserID}] = &in
		if in.LastRunAt.After(rs.newestRun) {
			rs.newestRun = in.LastRunAt
		}
	}
	for i := range im.usage {
		u := im.usage[i]
		if u.Hour == "" { // a day row of an older section
			u.Hour, u.Day = u.Day+"T00", ""
		}
		k := usageKey{u.Hour, u.AgentID, u.UserID, u.Provider, u.Model, u.ProviderType, u.APIKeyID}
		if prev := rs.usage[k]; prev != nil { // cannot happen in a section this build wrote
			u = prev.plus(u)
		}
		rs.usage[k] = &u
		if h, err := time.Parse(hourLayout, u.Hour); err == nil && h.After(rs.newestRun) {
			rs.newestRun = h
		}
	}
	rs.prune()
}

// plus adds v's counters to a copy of u.
func (u *usageRec) plus(v usageRec) usageRec {
	w := *u
	w.Runs += v.Runs
	w.Errors += v.Errors
	w.LLMCalls += v.LLMCalls
	w.ToolCalls += v.ToolCalls
	w.PromptTokens += v.PromptTokens
	w.CompletionTokens += v.CompletionTokens
	w.CacheReadTokens += v.CacheReadTokens
	w.CacheWriteTokens += v.CacheWriteTokens
	w.ReasoningTokens += v.ReasoningTokens
	w.DurationMs += v.DurationMs
	w.CostNano = satAdd(w.CostNano, v.CostNano)
	w.UnpricedCalls += v.UnpricedCalls
	return w
}

func cmpUsage(x, y usageRec) int {
	return cmp.Or(
		strings.Compare(x.Hour, y.Hour),
		bytes.Compare(x.AgentID[:], y.AgentID[:]),
		strings.Compare(x.UserID, y.UserID),
		strings.Compare(x.Provider, y.Provider),
		strings.Compare(x.Model, y.Model),
		strings.Compare(x.ProviderType, y.ProviderType),
		bytes.Compare(x.APIKeyID[:], y.APIKeyID[:]),
	)
}
