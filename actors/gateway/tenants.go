package gateway

import (
	"context"
	"fmt"
	"hash/fnv"
	"log/slog"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/google/uuid"

	"gatehouse/actors"
	"gatehouse/actors/clock"
)

// Tenant shards own the high-rate kinds that belong to one tenant:
// sessions with their turns, and memory entries with their search index.
// Each kind is partitioned by a routing key (tenantKey): a session by its
// key, a memory entry by its user. So one user's memory searches, or one
// busy session, occupy one shard; the registry and the other shards go
// on. A shard reads agents from the registry's published view, never by
// asking the registry, so nothing waits on another actor.

// sessionTenant is the routing key of user's sessions, memoryTenant that
// of a user's memory entries ("" for entries of every user): each user's
// on one shard, so that shard checks the user's caps (Quotas) alone.
func sessionTenant(user string) string { return "s:" + user }
func memoryTenant(user string) string  { return "u:" + user }

// tenantOf is the shard of routing key k among n (FNV-1a: the same in
// every process, so restore places an entity where live traffic finds it).
func tenantOf(k string, n int) int {
	h := fnv.New32a()
	_, _ = h.Write([]byte(k))
	return int(h.Sum32() % uint32(n))
}

// tenantPart is one tenant shard's state: sessions (by id, and by key),
// memory entries with their index, and the audit entries of its changes.
type tenantPart struct {
	sessions   table[*sessionRec]
	sessionsOf map[string]int // sessions by user, for Quotas.Sessions
	memory     *memIndex
	activity   activityLog
	live       liveMarks // cluster mode: this node's latest writes (live.go)
	ledgers    ledgers   // budget ledgers by budget id (budgetledger.go)
}

func newTenantPart(maxActivity int) *tenantPart {
	return &tenantPart{
		sessions:   newTable(func(x *sessionRec) string { return sessionName(x.UserID, x.Key) }),
		sessionsOf: map[string]int{},
		memory:     newMemIndex(),
		activity:   newActivityLog(maxActivity),
		ledgers:    ledgers{},
	}
}

// apply is the part's one transition, live and on replay. Sessions carry
// a watermark (sessionRec.Seq): a record a snapshot already holds is
// skipped. Memory entries and audit entries are full-state saves and
// deletes, so applying one again changes nothing.
func (p *tenantPart) apply(seq uint64, ev event) {
	if p.ledgers.apply(seq, ev) {
		return
	}
	switch e := ev.(type) {
	case entitySaved:
		switch x := e.ent.(type) {
		case *sessionRec:
			p.saveSession(seq, x)
		case *memoryRec:
			p.memory.save(x)
		case *activityRec:
			p.activity.save(x)
		default:
			panic(fmt.Sprintf("gateway: tenant part cannot save %T", x))
		}
	case entityDeleted:
		switch e.kind {
		case kindSession:
			if x, ok := p.sessions.drop(e.id); ok {
				p.countSession(x.UserID, -1)
			}
		case kindMemory:
			p.memory.drop(e.id)
		default:
			panic(fmt.Sprintf("gateway: tenant part cannot delete %q", e.kind))
		}
	case sessionTurnAppended:
		p.appendTurn(seq, e.turn)
	default:
		panic(fmt.Sprintf("gateway: tenant part cannot apply %T", ev))
	}
}

// countSession adds d to user's count of sessions.
func (p *tenantPart) countSession(user string, d int) {
	if p.sessionsOf[user] += d; p.sessionsOf[user] <= 0 {
		delete(p.sessionsOf, user)
	}
}

// memoryOf is how many memory entries of user the part holds.
func (p *tenantPart) memoryOf(user string) int {
	n := 0
	for g, st := range p.memory.groups {
		if g.user == user {
			n += st.n
		}
	}
	return n
}

// holds reports whether the part holds entity k/id.
func (p *tenantPart) holds(k kind, id uuid.UUID) bool {
	switch k {
	case kindSession:
		_, ok := p.sessions.rows[id]
		return ok
	case kindMemory:
		_, ok := p.memory.rows[id]
		return ok
	case kindBudgetLedger:
		_, ok := p.ledgers[id]
		return ok
	}
	return false
}

func (p *tenantPart) entities(dst []entity) []entity {
	dst = p.activity.appendTo(p.sessions.appendTo(dst))
	for _, m := range p.memory.rows {
		dst = append(dst, m)
	}
	return p.ledgers.appendTo(dst)
}

// tenantShard is the actor owning one tenantPart. Like the registry it
// validates, appends (durable on return), applies and answers; it also
// serializes each of its sessions' turns (turns, not durable).
type tenantShard struct {
	idx   int
	log   actors.EventLog
	clock clock.Clock
	lg    *slog.Logger
	part  *tenantPart
	view  func() *registryPart // the registry's published view (agents)
	quota Quotas
	turns map[string]*turnState
	by    *Actor // who sent the command being handled (nil: internal)
	node  string // Config.NodeID: the writer of its budget records
	// allow are this node's allowances on the shard's budgets
	// (budgetallow.go), also published in Gateway.allow for the callers.
	allow map[uuid.UUID]*allowance
	// pending are the calls waiting for their cluster holds (by hold id)
	// to be applied in log order; gw is the gateway (its remainingAfter).
	pending map[uuid.UUID]*pendingHold
	gw      *Gateway
}

// tenantCommand is a tenant shard's one generic message (see command).
type tenantCommand struct{ run func(t *tenantShard) }

// Receive is the shard's mailbox entry point.
func (t *tenantShard) Receive(ctx actor.Context) { t.handle(ctx.Message()) }

func (t *tenantShard) handle(msg any) {
	switch m := msg.(type) {
	case withActor:
		m.as(&t.by, t.handle)
	case tenantCommand:
		m.run(t)
	case queryActivity:
		m.reply <- queryActivityLog(&t.part.activity, m.f)
	case captureMsg:
		m.reply <- t.part.entities(nil)
	case liveApply:
		t.part.applyLive(m)
		t.liveBudget(m.ev)
		m.done <- struct{}{}
	}
}

// commit appends evs, and the audit entry of the change (routed back to
// this shard by tenant) when an API caller made it, then applies them
// (commitAs).
func (t *tenantShard) commit(tenant string, au audit, evs ...event) error {
	au.tenant = tenant
	return commitAs(t.log, t.part, t.by, t.clock.Now(), au, evs...)
}

// agent finds an agent by id or agent_key in the registry's view.
func (t *tenantShard) agent(ref string) (*agentRec, bool) { return t.view().agents.get(ref) }

// purgeAgent deletes the sessions and memory entries of agent id (ids are
// never reused).
func (t *tenantShard) purgeAgent(id uuid.UUID) error {
	return t.purge(func(a uuid.UUID) bool { return a == id })
}

// purgeOrphans deletes the sessions and memory entries whose agent no
// longer exists: those of an agent deleted just before a crash, whose
// purge did not reach this shard.
func (t *tenantShard) purgeOrphans() error {
	agents := t.view().agents.rows
	return t.purge(func(id uuid.UUID) bool { _, ok := agents[id]; return id != uuid.Nil && !ok })
}

// purge deletes, in one write, the sessions and memory entries of the
// agents gone selects.
func (t *tenantShard) purge(gone func(agent uuid.UUID) bool) error {
	var evs []event
	evs = t.part.memory.deletes(evs, func(m *memoryRec) bool { return gone(m.AgentID) })
	evs = t.part.sessions.deletes(evs, func(x *sessionRec) bool { return gone(x.AgentID) })
	if len(evs) == 0 {
		return nil
	}
	return commitAll(t.log, t.part, evs...)
}

// startTenants spawns the tenant shards with their restored parts.
func (g *Gateway) startTenants(env actors.ExtensionEnv, parts []*tenantPart) {
	g.tenants = make([]*actor.PID, len(parts))
	for i, p := range parts {
		ts := &tenantShard{idx: i, log: g.log, clock: g.clock, lg: g.lg, part: p, view: g.view.Load, quota: g.cfg.Quotas, node: g.cfg.NodeID, gw: g}
		g.tenants[i] = g.root.Spawn(env.Props(func() actor.Actor { return ts }))
	}
}

// tenantFor is the shard of routing key k.
func (g *Gateway) tenantFor(k string) int { return tenantOf(k, len(g.tenants)) }

// callTenant runs fn on tenant shard i on behalf of ctx's caller and
// waits for its result (see call).
func callTenant[R any](ctx context.Context, g *Gateway, i int, fn func(t *tenantShard) (R, error)) (R, error) {
	g.tenantAsks.Inc()
	wrap := func(run func(*tenantShard)) any { return tenantCommand{run: run} }
	return askOp(ctx, g, g.tenants[i], wrap, fn)
}

// eachTenant runs fn on the shards (nil: every shard), all at once, and
// gathers their results in shard order; the first error wins.
func eachTenant[R any](ctx context.Context, g *Gateway, shards []int, fn func(t *tenantShard) (R, error)) ([]R, error) {
	if shards == nil {
		shards = make([]int, len(g.tenants))
		for i := range shards {
			shards[i] = i
		}
	}
	type result struct {
		i   int
		v   R
		err error
	}
	replies := make(chan result, len(shards))
	g.tenantAsks.Add(float64(len(shards)))
	for i, s := range shards {
		g.send(ctx, g.tenants[s], tenantCommand{run: func(t *tenantShard) {
			v, err := fn(t)
			replies <- result{i, v, err}
		}})
	}
	out := make([]R, len(shards))
	var first error
	for range shards {
		r, err := await(ctx, replies)
		if err != nil {
			return nil, err
		}
		out[r.i] = r.v
		if first == nil {
			first = r.err
		}
	}
	return out, first
}

// tenantView is a read of a tenant shard's part, run in the shard's
// actor (readTenants): it has no commit and no apply, so a read cannot
// write. Tenant parts are not published as the registry's is: their
// reads are messages, answered between the shard's writes.
type tenantView struct{ p *tenantPart }

func (v tenantView) listSessions(f SessionFilter, admin bool) []Session {
	return v.p.listSessions(f, admin)
}

// sessionOwners are the users who have a session key in the part.
func (v tenantView) sessionOwners(key string) []string {
	var users []string
	for _, x := range v.p.sessions.rows {
		if x.Key == key {
			users = append(users, x.UserID)
		}
	}
	return users
}

func (v tenantView) searchMemory(f MemoryFilter, terms []string) memHits {
	return v.p.memory.search(f, terms)
}
func (v tenantView) listMemory(f MemoryFilter) []*memoryRec { return v.p.memory.list(f) }

// readTenants is eachTenant for a read: fn gets the shard's tenantView.
func readTenants[R any](ctx context.Context, g *Gateway, shards []int, fn func(v tenantView) (R, error)) ([]R, error) {
	return eachTenant(ctx, g, shards, func(t *tenantShard) (R, error) { return fn(tenantView{t.part}) })
}

// purgeAgentData deletes agent id's sessions and memory entries on every
// tenant shard (after the registry deleted the agent).
func (g *Gateway) purgeAgentData(ctx context.Context, id uuid.UUID) error {
	_, err := eachTenant(ctx, g, nil, func(t *tenantShard) (struct{}, error) {
		return struct{}{}, t.purgeAgent(id)
	})
	if err != nil {
		return fmt.Errorf("purge sessions and memory of agent %s: %w", id, err)
	}
	return nil
}
