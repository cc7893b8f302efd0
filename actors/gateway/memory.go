package gateway

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/google/uuid"
)

// Memory entries: notes agents (memory_save) and users (POST /v1/memory)
// keep, which memory_search ranks for a query. An entry belongs to an
// agent (or to every agent: none), and to a user (or to every user of the
// agent: none). A run of agent A for user U sees the entries of A or of
// no agent, whose user is U or nobody: never another user's.

// MemoryEntry is one entry.
type MemoryEntry struct {
	ID        uuid.UUID  `json:"id"`
	Content   string     `json:"content"`
	AgentID   *uuid.UUID `json:"agent_id"`
	UserID    string     `json:"user_id"`
	Tags      []string   `json:"tags"`
	CreatedAt time.Time  `json:"created_at"`
	Score     float64    `json:"score,omitempty"` // search results only
}

// MemoryInput creates an entry. Agent is an id or agent_key ("": none).
type MemoryInput struct {
	Content string   `json:"content"`
	Agent   string   `json:"agent_id"`
	UserID  string   `json:"user_id"`
	Tags    []string `json:"tags"`
}

// Memory limits.
const (
	MaxMemoryContent = 16 << 10
	maxMemoryTags    = 16
)

// MemoryFilter selects entries; Query ranks them (BM25), else newest
// first.
type MemoryFilter struct {
	AgentID       uuid.UUID // uuid.Nil: any
	UserID        string    // "": any
	Query         string
	Limit, Offset int // Limit 0: 50
	// Visible selects what a run of AgentID for UserID sees instead of
	// exact matches.
	Visible bool
}

type memoryRec struct {
	ID        uuid.UUID `json:"id"`
	Content   string    `json:"content"`
	AgentID   uuid.UUID `json:"agent_id"`
	UserID    string    `json:"user_id,omitempty"`
	Tags      []string  `json:"tags,omitempty"`
	CreatedAt time.Time `json:"created_at"`
}

func (m *memoryRec) ref() (kind, uuid.UUID) { return kindMemory, m.ID }

func (m *memoryRec) view() MemoryEntry {
	e := MemoryEntry{ID: m.ID, Content: m.Content, UserID: m.UserID, Tags: orEmpty(m.Tags), CreatedAt: m.CreatedAt}
	if m.AgentID != uuid.Nil {
		id := m.AgentID
		e.AgentID = &id
	}
	return e
}

func (f MemoryFilter) matches(m *memoryRec) bool { return f.matchesGroup(m.AgentID, m.UserID) }

// matchesGroup reports whether f selects the entries of agent and user.
func (f MemoryFilter) matchesGroup(agent uuid.UUID, user string) bool {
	if f.Visible {
		return (agent == uuid.Nil || agent == f.AgentID) && (user == "" || user == f.UserID)
	}
	return (f.AgentID == uuid.Nil || agent == f.AgentID) && (f.UserID == "" || user == f.UserID)
}

// memIndex holds a tenant shard's memory entries with an inverted index
// kept up to date as entries are saved and deleted, so a search reads the
// postings of its terms instead of tokenizing every entry.
type memIndex struct {
	rows   map[uuid.UUID]*memoryRec
	docs   map[uuid.UUID]memDoc
	post   map[string]map[uuid.UUID]int32 // term → entry → occurrences
	groups map[memGroup]memStats          // entries and tokens by (agent, user)
}

// memDoc is what the index keeps of an entry: its distinct terms (to drop
// its postings) and its length in tokens.
type memDoc struct {
	terms  []string
	length int
}

type memGroup struct {
	agent uuid.UUID
	user  string
}

type memStats struct{ n, length int }

func newMemIndex() *memIndex {
	return &memIndex{rows: map[uuid.UUID]*memoryRec{}, docs: map[uuid.UUID]memDoc{},
		post: map[string]map[uuid.UUID]int32{}, groups: map[memGroup]memStats{}}
}

// save stores e (replacing the entry with its id) and indexes it.
func (x *memIndex) save(e *memoryRec) {
	x.drop(e.ID)
	toks := tokens(e.Content + " " + strings.Join(e.Tags, " "))
	tf := map[string]int32{}
	for _, t := range toks {
		tf[t]++
	}
	d := memDoc{terms: make([]string, 0, len(tf)), length: len(toks)}
	for t, c := range tf {
		d.terms = append(d.terms, t)
		ps := x.post[t]
		if ps == nil {
			ps = map[uuid.UUID]int32{}
			x.post[t] = ps
		}
		ps[e.ID] = c
	}
	x.rows[e.ID], x.docs[e.ID] = e, d
	g := memGroup{e.AgentID, e.UserID}
	st := x.groups[g]
	st.n, st.length = st.n+1, st.length+d.length
	x.groups[g] = st
}

// drop removes entry id and its postings, if present.
func (x *memIndex) drop(id uuid.UUID) {
	e, ok := x.rows[id]
	if !ok {
		return
	}
	d := x.docs[id]
	for _, t := range d.terms {
		if ps := x.post[t]; ps != nil {
			if delete(ps, id); len(ps) == 0 {
				delete(x.post, t)
			}
		}
	}
	g := memGroup{e.AgentID, e.UserID}
	if st := x.groups[g]; st.n <= 1 {
		delete(x.groups, g)
	} else {
		x.groups[g] = memStats{st.n - 1, st.length - d.length}
	}
	delete(x.rows, id)
	delete(x.docs, id)
}

// deletes appends the deletion of every entry match holds, in id order.
func (x *memIndex) deletes(evs []event, match func(*memoryRec) bool) []event {
	n := len(evs)
	for id, e := range x.rows {
		if match(e) {
			evs = append(evs, entityDeleted{kind: kindMemory, id: id})
		}
	}
	slices.SortFunc(evs[n:], func(a, b event) int { return cmpUUID(a.(entityDeleted).id, b.(entityDeleted).id) })
	return evs
}

// memHits is one shard's share of a ranked search: how many entries the
// filter selects there and their length in tokens (for the average), and
// those holding a query term with each term's count (tf, len(terms) per
// entry, in docs order).
type memHits struct {
	n, length int
	docs      []memHit
	tf        []int32
}

type memHit struct {
	e      *memoryRec
	length int
}

// search returns the shard's share of a search for terms among the
// entries f selects: the cost is the terms' postings, not the entries.
func (x *memIndex) search(f MemoryFilter, terms []string) memHits {
	var h memHits
	for g, st := range x.groups {
		if f.matchesGroup(g.agent, g.user) {
			h.n, h.length = h.n+st.n, h.length+st.length
		}
	}
	size := 0
	for _, t := range terms {
		size += len(x.post[t])
	}
	at := make(map[uuid.UUID]int, size)
	for j, t := range terms {
		for id, c := range x.post[t] {
			i, ok := at[id]
			if !ok {
				e := x.rows[id]
				if !f.matches(e) {
					continue
				}
				i = len(h.docs)
				at[id] = i
				h.docs = append(h.docs, memHit{e: e, length: x.docs[id].length})
				h.tf = append(h.tf, make([]int32, len(terms))...)
			}
			h.tf[i*len(terms)+j] = c
		}
	}
	return h
}

// list returns the entries f selects.
func (x *memIndex) list(f MemoryFilter) []*memoryRec {
	var out []*memoryRec
	for _, e := range x.rows {
		if f.matches(e) {
			out = append(out, e)
		}
	}
	return out
}

// maxQueryTerms bounds a search: the distinct terms of a query past it
// are ignored.
const maxQueryTerms = 32

// queryTerms are a query's distinct tokens, sorted, at most maxQueryTerms.
func queryTerms(q string) []string {
	terms := slices.Compact(slices.Sorted(slices.Values(tokens(q))))
	return terms[:min(len(terms), maxQueryTerms)]
}

func (t *tenantShard) putMemory(e memoryRec, agent string) (MemoryEntry, error) {
	if agent != "" {
		a, ok := t.agent(agent)
		if !ok {
			return MemoryEntry{}, fmt.Errorf("agent_id: agent %q: %w", agent, ErrNotFound)
		}
		e.AgentID = a.ID
	}
	if _, replaces := t.part.memory.rows[e.ID]; !replaces && e.UserID != "" && t.part.memoryOf(e.UserID) >= t.quota.MemoryEntries {
		return MemoryEntry{}, errQuota("memory entries", "memory_entries_per_user", int64(t.quota.MemoryEntries))
	}
	e.CreatedAt = t.clock.Now().UTC()
	au := audit{action: "memory.create", entityType: string(kindMemory), entityID: e.ID.String(),
		summary: fmt.Sprintf("saved a memory entry of %d bytes for user %q", len(e.Content), e.UserID)}
	if err := t.commit(memoryTenant(e.UserID), au, entitySaved{&e}); err != nil {
		return MemoryEntry{}, fmt.Errorf("log memory: %w", err)
	}
	return e.view(), nil
}

// delMemory deletes entry id if this shard holds it and user ("": any)
// owns it; found reports whether it did.
func (t *tenantShard) delMemory(id uuid.UUID, user string) (found bool, err error) {
	e, ok := t.part.memory.rows[id]
	if !ok || user != "" && e.UserID != user {
		return false, nil
	}
	au := audit{action: "memory.delete", entityType: string(kindMemory), entityID: e.ID.String(), summary: "deleted a memory entry"}
	if err := t.commit(memoryTenant(e.UserID), au, entityDeleted{kind: kindMemory, id: e.ID}); err != nil {
		return true, fmt.Errorf("log memory delete: %w", err)
	}
	return true, nil
}

// memoryShards are the tenant shards that can hold what f selects: a
// run's view needs its user's and the entries of every user; an exact
// user one shard; any user all of them (nil).
func (g *Gateway) memoryShards(f MemoryFilter) []int {
	switch {
	case f.Visible:
		a, b := g.tenantFor(memoryTenant(f.UserID)), g.tenantFor(memoryTenant(""))
		if a == b {
			return []int{a}
		}
		return []int{a, b}
	case f.UserID != "":
		return []int{g.tenantFor(memoryTenant(f.UserID))}
	}
	return nil
}

type scored struct {
	e     *memoryRec
	score float64
}

// better orders search results: higher score first, then newest.
func better(a, b scored) int {
	if a.score != b.score {
		return cmp.Compare(b.score, a.score)
	}
	return cmpUUID(b.e.ID, a.e.ID)
}

// topK sorts the best k of out to its front and returns them: a heap of
// k over the rest, so a page of a large result costs O(n log k).
func topK(out []scored, k int) []scored {
	if k <= 0 {
		return out[:0]
	}
	if k >= len(out) {
		slices.SortFunc(out, better)
		return out
	}
	h := out[:k] // a heap whose root is the worst of the best k
	down := func(i int) {
		for {
			c := 2*i + 1
			if c >= len(h) {
				return
			}
			if c+1 < len(h) && better(h[c+1], h[c]) > 0 {
				c++
			}
			if better(h[c], h[i]) <= 0 {
				return
			}
			h[i], h[c] = h[c], h[i]
			i = c
		}
	}
	for i := k/2 - 1; i >= 0; i-- {
		down(i)
	}
	for _, s := range out[k:] {
		if better(s, h[0]) < 0 {
			h[0] = s
			down(0)
		}
	}
	slices.SortFunc(h, better)
	return h
}

// bm25 ranks the hits gathered from the shards with Okapi BM25 (k1 1.2,
// b 0.75) over lower-cased letter-and-digit tokens, with the document
// frequencies and average length of the entries the filter selects;
// entries without a query term are left out. Ties: newest first.
func bm25(parts []memHits, nterms int) []scored {
	var n, total int
	df := make([]int, nterms)
	for _, p := range parts {
		n, total = n+p.n, total+p.length
		for j, c := range p.tf {
			if c > 0 {
				df[j%nterms]++
			}
		}
	}
	if n == 0 || nterms == 0 {
		return nil
	}
	avg := float64(total) / float64(n)
	const k1, b = 1.2, 0.75
	var out []scored
	for _, p := range parts {
		for i, d := range p.docs {
			var s float64
			for j, c := range p.tf[i*nterms : (i+1)*nterms] {
				if c == 0 {
					continue
				}
				f := float64(c)
				idf := math.Log(1 + (float64(n)-float64(df[j])+0.5)/(float64(df[j])+0.5))
				s += idf * f * (k1 + 1) / (f + k1*(1-b+b*float64(d.length)/avg))
			}
			if s > 0 {
				out = append(out, scored{d.e, s})
			}
		}
	}
	return out
}

func tokens(s string) []string {
	return strings.FieldsFunc(strings.ToLower(s), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
}

// SaveMemory stores an entry. ErrInvalid (naming the field), ErrNotFound
// (the agent).
func (g *Gateway) SaveMemory(ctx context.Context, in MemoryInput) (MemoryEntry, error) {
	switch {
	case strings.TrimSpace(in.Content) == "":
		return MemoryEntry{}, fmt.Errorf("content: required: %w", ErrInvalid)
	case len(in.Content) > MaxMemoryContent || !utf8.ValidString(in.Content):
		return MemoryEntry{}, fmt.Errorf("content: UTF-8 text of at most %d bytes: %w", MaxMemoryContent, ErrInvalid)
	case len(in.Tags) > maxMemoryTags:
		return MemoryEntry{}, fmt.Errorf("tags: at most %d: %w", maxMemoryTags, ErrInvalid)
	case in.UserID != "" && !ValidUserID(in.UserID):
		return MemoryEntry{}, fmt.Errorf("user_id: printable text: %w", ErrInvalid)
	}
	for _, t := range in.Tags {
		if t == "" || len(t) > 64 || !ValidUserID(t) {
			return MemoryEntry{}, fmt.Errorf("tags: each 1-64 printable characters: %w", ErrInvalid)
		}
	}
	id, err := uuid.NewV7()
	if err != nil {
		return MemoryEntry{}, err
	}
	rec := memoryRec{ID: id, Content: in.Content, UserID: in.UserID, Tags: slices.Clone(in.Tags)}
	return callTenant(ctx, g, g.tenantFor(memoryTenant(in.UserID)), func(t *tenantShard) (MemoryEntry, error) {
		return t.putMemory(rec, in.Agent)
	})
}

// Memory lists entries matching f and how many match in all: ranked
// when f has a query, else newest first. The shards that can hold them
// answer at once; ranking and paging happen in the caller's goroutine.
func (g *Gateway) Memory(ctx context.Context, f MemoryFilter) ([]MemoryEntry, int, error) {
	shards := g.memoryShards(f)
	if f.Query != "" {
		terms := queryTerms(f.Query)
		parts, err := readTenants(ctx, g, shards, func(v tenantView) (memHits, error) { return v.searchMemory(f, terms), nil })
		if err != nil {
			return nil, 0, fmt.Errorf("search memory: %w", err)
		}
		ranked := bm25(parts, len(terms))
		lo, hi := page(len(ranked), f.Offset, f.Limit, 50)
		out := make([]MemoryEntry, 0, hi-lo)
		for _, s := range topK(ranked, hi)[lo:hi] {
			v := s.e.view()
			v.Score = math.Round(s.score*1000) / 1000
			out = append(out, v)
		}
		return out, len(ranked), nil
	}
	parts, err := readTenants(ctx, g, shards, func(v tenantView) ([]*memoryRec, error) { return v.listMemory(f), nil })
	if err != nil {
		return nil, 0, fmt.Errorf("list memory: %w", err)
	}
	hits := slices.Concat(parts...)
	slices.SortFunc(hits, func(a, b *memoryRec) int { return cmpUUID(b.ID, a.ID) })
	lo, hi := page(len(hits), f.Offset, f.Limit, 50)
	out := make([]MemoryEntry, 0, hi-lo)
	for _, e := range hits[lo:hi] {
		out = append(out, e.view())
	}
	return out, len(hits), nil
}

// SearchMemory ranks the entries a run of agent for user sees for query
// and returns the best k.
func (g *Gateway) SearchMemory(ctx context.Context, agent uuid.UUID, user, query string, k int) ([]MemoryEntry, error) {
	es, _, err := g.Memory(ctx, MemoryFilter{AgentID: agent, UserID: user, Query: query, Limit: k, Visible: true})
	return es, err
}

// DeleteMemory removes an entry; user "" may remove anyone's. ErrNotFound.
func (g *Gateway) DeleteMemory(ctx context.Context, id uuid.UUID, user string) error {
	var shards []int // a trusted caller's delete: whichever shard holds it
	if user != "" {
		shards = []int{g.tenantFor(memoryTenant(user))}
	}
	found, err := eachTenant(ctx, g, shards, func(t *tenantShard) (bool, error) { return t.delMemory(id, user) })
	if err != nil {
		return err
	}
	if !slices.Contains(found, true) {
		return ErrNotFound
	}
	return nil
}
