package gateway

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/google/uuid"
)

// The activity log: every change made through the gateway's API gets an
// audit entry in the same WAL append as the change (commitAs), so there
// is no change without its entry and no entry without its change. An
// entry is an entity of kind "activity" owned by the part that made the
// change (a key shard for API keys, the registry for the rest): it is
// captured, restored and replayed like any entity. Each part keeps its
// newest Config.MaxActivity entries; ids are UUIDv7, so id order is the
// order of the changes.

// Actor is who made a change through the API: the transport puts it in
// the request's context (WithActor), the actor that commits the change
// writes it into the entry.
type Actor struct {
	Type   string // ActorToken, ActorAPIKey or ActorConsole
	ID     string // the API key's id; "gateway_token" for the token; the console user's id
	UserID string // the user the request acted for ("" for none)
	IP     string
}

// Actor types.
const (
	ActorToken  = "token"
	ActorAPIKey = "api_key"
	// ActorConsole is a user of the web console on :8080, through its
	// session (httpapi/gateway.Mount).
	ActorConsole = "console"
)

type actorKey struct{}

// WithActor returns ctx carrying a, so that the changes made with ctx are
// audited as a's.
func WithActor(ctx context.Context, a Actor) context.Context {
	return context.WithValue(ctx, actorKey{}, &a)
}

// actorOf is ctx's actor, or nil (an internal change: not audited).
func actorOf(ctx context.Context) *Actor {
	a, _ := ctx.Value(actorKey{}).(*Actor)
	return a
}

// Activity is one audit entry.
type Activity struct {
	ID         uuid.UUID `json:"id"`
	At         time.Time `json:"at"`
	ActorType  string    `json:"actor_type"`
	ActorID    string    `json:"actor_id"`
	UserID     string    `json:"user_id"`
	Action     string    `json:"action"`
	EntityType string    `json:"entity_type"`
	EntityID   string    `json:"entity_id"`
	IP         string    `json:"ip"`
	Summary    string    `json:"summary"`
}

// activityRec is the durable entry (kind activity, data version 1): the
// Activity's fields, and where it is applied.
type activityRec struct {
	Activity
	// Tenant is the routing key of the tenant shard whose change it
	// records (tenantKey: "s:" and a session key, "u:" and a user); ""
	// for the registry's changes and a key shard's.
	Tenant string `json:"tenant,omitempty"`
}

func (a *activityRec) ref() (kind, uuid.UUID) { return kindActivity, a.ID }
func (a *activityRec) view() Activity         { return a.Activity }

// audit describes a change for its entry.
type audit struct {
	action     string // "<entity>.<verb>": agent.create, api_key.revoke, …
	entityType string
	entityID   string
	summary    string
	tenant     string // the tenant shard's routing key ("": not a tenant shard's change)
}

// verbOf is the audit verb of a put: create, else update.
func verbOf(create bool) string {
	if create {
		return "create"
	}
	return "update"
}

// entry is the entry of change au made by by at now; nil when by is nil.
func (au audit) entry(by *Actor, now time.Time) *activityRec {
	if by == nil {
		return nil
	}
	id, err := uuid.NewV7()
	if err != nil {
		id = uuid.New()
	}
	return &activityRec{Activity: Activity{
		ID: id, At: now.UTC(), ActorType: by.Type, ActorID: by.ID, UserID: by.UserID, IP: by.IP,
		Action: au.action, EntityType: au.entityType, EntityID: au.entityID, Summary: au.summary,
	}, Tenant: au.tenant}
}

// recentLog is a part's newest entities of one kind (audit entries,
// delegations), by their UUIDv7 id: the order they were made in.
type recentLog[P interface {
	comparable
	entity
}] struct {
	max  int
	ids  []uuid.UUID // ascending
	rows map[uuid.UUID]P
	// shared: a published view holds ids and rows (see table.shared).
	shared bool
}

func (l *recentLog[P]) share() { l.shared = true }

// activityLog keeps audit entries.
type activityLog = recentLog[*activityRec]

func newActivityLog(max int) activityLog { return newRecentLog[*activityRec](max) }

func newRecentLog[P interface {
	comparable
	entity
}](max int) recentLog[P] {
	return recentLog[P]{max: max, rows: map[uuid.UUID]P{}}
}

// save adds e and drops the oldest beyond max. The result depends only
// on the set of entities, so live, replayed and restored parts agree.
func (l *recentLog[P]) save(e P) {
	if l.shared {
		l.ids, l.rows, l.shared = slices.Clone(l.ids), maps.Clone(l.rows), false
	}
	_, id := e.ref()
	if _, ok := l.rows[id]; !ok {
		i, _ := slices.BinarySearchFunc(l.ids, id, cmpUUID)
		l.ids = slices.Insert(l.ids, i, id)
	}
	l.rows[id] = e
	for len(l.ids) > l.max {
		delete(l.rows, l.ids[0])
		l.ids = l.ids[1:]
	}
}

func (l *recentLog[P]) appendTo(dst []entity) []entity {
	for _, id := range l.ids {
		dst = append(dst, l.rows[id])
	}
	return dst
}

// newest returns the entities matching keep, newest first.
func (l *recentLog[P]) newest(keep func(P) bool) []P {
	var out []P
	for i := len(l.ids) - 1; i >= 0; i-- {
		if e := l.rows[l.ids[i]]; keep(e) {
			out = append(out, e)
		}
	}
	return out
}

func cmpUUID(a, b uuid.UUID) int { return bytes.Compare(a[:], b[:]) }

// ActivityFilter selects entries; zero fields match everything.
type ActivityFilter struct {
	ActorType, ActorID string
	Action             string
	EntityType         string
	EntityID           string
	UserID             string
	From, To           time.Time // At in [From, To)
	Limit, Offset      int       // Limit 0: 50
}

func (f ActivityFilter) matches(a *activityRec) bool {
	switch {
	case f.ActorType != "" && a.ActorType != f.ActorType,
		f.ActorID != "" && a.ActorID != f.ActorID,
		f.Action != "" && a.Action != f.Action,
		f.EntityType != "" && a.EntityType != f.EntityType,
		f.EntityID != "" && a.EntityID != f.EntityID,
		f.UserID != "" && a.UserID != f.UserID,
		!f.From.IsZero() && a.At.Before(f.From),
		!f.To.IsZero() && !a.At.Before(f.To):
		return false
	}
	return true
}

// queryActivityLog answers a part's matching entries, newest first.
func queryActivityLog(l *activityLog, f ActivityFilter) []Activity {
	var out []Activity
	for _, a := range l.newest(f.matches) {
		out = append(out, a.view())
	}
	return out
}

type queryActivity struct {
	f     ActivityFilter
	reply chan []Activity
}

// Activity returns a page of the entries matching f, newest first, and
// how many match in all.
func (g *Gateway) Activity(ctx context.Context, f ActivityFilter) ([]Activity, int, error) {
	owners := slices.Concat(g.shards, []*actor.PID{g.registry}, g.tenants)
	replies := make(chan []Activity, len(owners))
	g.regAsks.Inc()
	g.tenantAsks.Add(float64(len(g.tenants)))
	for _, pid := range owners {
		g.root.Send(pid, queryActivity{f: f, reply: replies})
	}
	var all []Activity
	for range owners {
		as, err := await(ctx, replies)
		if err != nil {
			return nil, 0, fmt.Errorf("activity: %w", err)
		}
		all = append(all, as...)
	}
	slices.SortFunc(all, func(a, b Activity) int { return cmpUUID(b.ID, a.ID) })
	lo, hi := page(len(all), f.Offset, f.Limit, 50)
	return all[lo:hi], len(all), nil
}

// page bounds the page at offset of limit items (0: def) out of total:
// items[lo:hi], never out of range.
func page(total, offset, limit, def int) (lo, hi int) {
	if limit == 0 {
		limit = def
	}
	lo = min(max(offset, 0), total)
	return lo, min(lo+max(limit, 1), total)
}

// as handles the message w carries with *by set to its caller for the
// time of the call: how every actor that audits changes (key shards, the
// registry, tenant shards) receives one.
func (w withActor) as(by **Actor, handle func(any)) {
	*by = w.by
	handle(w.m)
	*by = nil
}

// withActor carries a message sent on behalf of an API caller.
type withActor struct {
	by *Actor
	m  any
}

// send sends m to pid, on behalf of ctx's actor if it has one.
func (g *Gateway) send(ctx context.Context, pid *actor.PID, m any) {
	if by := actorOf(ctx); by != nil {
		g.root.Send(pid, withActor{by: by, m: m})
		return
	}
	g.root.Send(pid, m)
}
