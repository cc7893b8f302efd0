package gateway

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sort"
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

func (f MemoryFilter) matches(m *memoryRec) bool {
	if f.Visible {
		return (m.AgentID == uuid.Nil || m.AgentID == f.AgentID) && (m.UserID == "" || m.UserID == f.UserID)
	}
	return (f.AgentID == uuid.Nil || m.AgentID == f.AgentID) && (f.UserID == "" || m.UserID == f.UserID)
}

type putMemory struct {
	rec   memoryRec
	agent string
	reply chan memoryReply
}

type queryMemory struct {
	f     MemoryFilter
	reply chan memoryReply
}

type delMemory struct {
	id    uuid.UUID
	user  string // "": any (a trusted caller)
	reply chan memoryReply
}

type memoryReply struct {
	e     MemoryEntry
	list  []MemoryEntry
	total int
	err   error
}

func (r memoryReply) failure() error { return r.err }

func (r *registry) putMemory(m putMemory) memoryReply {
	e := m.rec
	if m.agent != "" {
		a, ok := r.part.agents.get(m.agent)
		if !ok {
			return memoryReply{err: fmt.Errorf("agent_id: agent %q: %w", m.agent, ErrNotFound)}
		}
		e.AgentID = a.ID
	}
	e.CreatedAt = r.clock.Now().UTC()
	au := audit{action: "memory.create", entityType: string(kindMemory), entityID: e.ID.String(),
		summary: fmt.Sprintf("saved a memory entry of %d bytes for user %q", len(e.Content), e.UserID)}
	if err := r.commit(au, entitySaved{&e}); err != nil {
		return memoryReply{err: fmt.Errorf("log memory: %w", err)}
	}
	return memoryReply{e: e.view()}
}

func (r *registry) delMemory(m delMemory) memoryReply {
	e, ok := r.part.memory.rows[m.id]
	if !ok || m.user != "" && e.UserID != m.user {
		return memoryReply{err: ErrNotFound}
	}
	au := audit{action: "memory.delete", entityType: string(kindMemory), entityID: e.ID.String(), summary: "deleted a memory entry"}
	if err := r.commit(au, entityDeleted{kind: kindMemory, id: e.ID}); err != nil {
		return memoryReply{err: fmt.Errorf("log memory delete: %w", err)}
	}
	return memoryReply{}
}

func (r *registry) queryMemory(f MemoryFilter) memoryReply {
	var hits []*memoryRec
	for _, e := range r.part.memory.rows {
		if f.matches(e) {
			hits = append(hits, e)
		}
	}
	var out []MemoryEntry
	if f.Query != "" {
		for _, s := range bm25(hits, f.Query) {
			v := s.e.view()
			v.Score = math.Round(s.score*1000) / 1000
			out = append(out, v)
		}
	} else {
		sort.Slice(hits, func(i, j int) bool { return cmpUUID(hits[i].ID, hits[j].ID) > 0 })
		for _, e := range hits {
			out = append(out, e.view())
		}
	}
	lo, hi := page(len(out), f.Offset, f.Limit, 50)
	return memoryReply{list: slices.Clip(out[lo:hi]), total: len(out)}
}

type scored struct {
	e     *memoryRec
	score float64
}

// bm25 ranks entries for query with Okapi BM25 (k1 1.2, b 0.75) over
// lower-cased letter-and-digit tokens; entries without a query term are
// left out. Ties: newest first.
func bm25(entries []*memoryRec, query string) []scored {
	terms := slices.Compact(slices.Sorted(slices.Values(tokens(query))))
	if len(terms) == 0 || len(entries) == 0 {
		return nil
	}
	docs := make([][]string, len(entries))
	var totalLen float64
	df := map[string]int{}
	for i, e := range entries {
		docs[i] = tokens(e.Content + " " + strings.Join(e.Tags, " "))
		totalLen += float64(len(docs[i]))
		seen := map[string]bool{}
		for _, t := range docs[i] {
			if !seen[t] {
				seen[t] = true
				df[t]++
			}
		}
	}
	avg := totalLen / float64(len(docs))
	n := float64(len(docs))
	const k1, b = 1.2, 0.75
	var out []scored
	for i, d := range docs {
		tf := map[string]int{}
		for _, t := range d {
			tf[t]++
		}
		var s float64
		for _, q := range terms {
			f := float64(tf[q])
			if f == 0 {
				continue
			}
			idf := math.Log(1 + (n-float64(df[q])+0.5)/(float64(df[q])+0.5))
			s += idf * f * (k1 + 1) / (f + k1*(1-b+b*float64(len(d))/avg))
		}
		if s > 0 {
			out = append(out, scored{entries[i], s})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].score != out[j].score {
			return out[i].score > out[j].score
		}
		return cmpUUID(out[i].e.ID, out[j].e.ID) > 0
	})
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
	m := putMemory{rec: memoryRec{ID: id, Content: in.Content, UserID: in.UserID, Tags: slices.Clone(in.Tags)}, agent: in.Agent, reply: make(chan memoryReply, 1)}
	r, err := ask(ctx, g, m, m.reply)
	return r.e, err
}

// Memory lists entries matching f and how many match in all.
func (g *Gateway) Memory(ctx context.Context, f MemoryFilter) ([]MemoryEntry, int, error) {
	reply := make(chan memoryReply, 1)
	r, err := ask(ctx, g, queryMemory{f: f, reply: reply}, reply)
	return r.list, r.total, err
}

// SearchMemory ranks the entries a run of agent for user sees for query
// and returns the best k.
func (g *Gateway) SearchMemory(ctx context.Context, agent uuid.UUID, user, query string, k int) ([]MemoryEntry, error) {
	es, _, err := g.Memory(ctx, MemoryFilter{AgentID: agent, UserID: user, Query: query, Limit: k, Visible: true})
	return es, err
}

// DeleteMemory removes an entry; user "" may remove anyone's. ErrNotFound.
func (g *Gateway) DeleteMemory(ctx context.Context, id uuid.UUID, user string) error {
	reply := make(chan memoryReply, 1)
	_, err := ask(ctx, g, delMemory{id: id, user: user, reply: reply}, reply)
	return err
}
