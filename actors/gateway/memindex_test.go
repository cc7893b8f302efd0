package gateway

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/google/uuid"
)

// TestMemoryIndexMatchesScan drives random saves, replacements and
// deletes into two tenant parts (a user's and the shared one) and checks
// that every search through the incremental index ranks exactly as the
// brute-force BM25 over the entries the filter selects (the gateway's
// search before the index), scores included, and that topK agrees with a
// full sort for every page size.
func TestMemoryIndexMatchesScan(t *testing.T) {
	for seed := range uint64(20) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { checkIndex(t, seed) })
	}
}

func checkIndex(t *testing.T, seed uint64) {
	r := rand.New(rand.NewPCG(seed, 7))
	words := []string{"tea", "coffee", "cat", "dog", "miso", "rain", "sun", "blue", "green", "Tea", "café", "42"}
	users := []string{"", "alice", "bob"}
	agents := []uuid.UUID{uuid.Nil, {1}, {2}}
	parts := map[string]*memIndex{}
	all := map[uuid.UUID]*memoryRec{}
	var ids []uuid.UUID
	for i := range 300 {
		if len(ids) > 0 && r.IntN(5) == 0 {
			id := ids[r.IntN(len(ids))]
			if e := all[id]; e != nil {
				parts[e.UserID].drop(id)
				delete(all, id)
			}
			continue
		}
		var sb strings.Builder
		for range 1 + r.IntN(12) {
			sb.WriteString(words[r.IntN(len(words))] + " ")
		}
		id := uuid.UUID{byte(i >> 8), byte(i), 9}
		if len(ids) > 0 && r.IntN(6) == 0 { // a replacement keeps its user
			id = ids[r.IntN(len(ids))]
		}
		u := users[r.IntN(len(users))]
		if old := all[id]; old != nil {
			u = old.UserID
		}
		e := &memoryRec{ID: id, Content: sb.String(), UserID: u, AgentID: agents[r.IntN(len(agents))], Tags: []string{words[r.IntN(len(words))]}}
		if parts[u] == nil {
			parts[u] = newMemIndex()
		}
		parts[u].save(e)
		all[id] = e
		ids = append(ids, id)
	}
	for range 40 {
		q := words[r.IntN(len(words))] + " " + words[r.IntN(len(words))]
		f := MemoryFilter{AgentID: agents[r.IntN(len(agents))], UserID: users[1+r.IntN(2)], Query: q, Visible: true}
		var hits []*memoryRec
		for _, e := range all {
			if f.matches(e) {
				hits = append(hits, e)
			}
		}
		want := scanBM25(hits, q)
		terms := queryTerms(q)
		var shares []memHits
		for _, u := range []string{f.UserID, ""} {
			if p := parts[u]; p != nil {
				shares = append(shares, p.search(f, terms))
			}
		}
		got := bm25(shares, len(terms))
		full := topK(slices.Clone(got), len(got))
		if len(full) != len(want) {
			t.Fatalf("query %q: %d results, scan has %d", q, len(full), len(want))
		}
		for i := range want {
			if full[i].e != want[i].e || full[i].score != want[i].score {
				t.Fatalf("query %q: result %d = %s %v, scan has %s %v", q, i, full[i].e.ID, full[i].score, want[i].e.ID, want[i].score)
			}
		}
		for k := range len(full) + 1 {
			if top := topK(slices.Clone(got), k); !slices.Equal(top[:min(k, len(top))], full[:min(k, len(full))]) {
				t.Fatalf("query %q: topK(%d) differs from the sorted results", q, k)
			}
		}
	}
}

// scanBM25 is the search before the index: it tokenizes every selected
// entry per query.
func scanBM25(entries []*memoryRec, query string) []scored {
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
