package gateway

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"

	"gatehouse/actors/actorstest"
	"gatehouse/wal"
)

var propSeed = flag.Uint64("seed", 0, "seed of TestLiveEqualsRestore (0: from the clock)")

// TestLiveEqualsRestore drives random command sequences over the whole
// gateway domain (providers, agents, API keys, runs, clock advances) and
// checks, through the snapshot encoding, that the live state equals a
// WAL-only restore and a snapshot-then-WAL restore, both as pure replays
// of the node's WAL and through real restarts of the System. A model of
// the expected state checks every command's outcome, so a mistake shared
// by live and replay code is caught too. Entity ids come from a seeded
// source whose i-th id is the same for every kind: providers and agents
// share ids, so applying a delete to the wrong kind cannot go unseen.
func TestLiveEqualsRestore(t *testing.T) {
	seed := *propSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (rerun with -seed %d)", seed, seed)
	seen := map[string]int{}
	// Six seeds, and more (up to forty) while a record kind was never
	// driven: a random run may miss a rare one (71 budget_ledger took up
	// to 11 seeds in TestApplyLiveEqualsWriter's sampled runs).
	for i := uint64(0); i < 6 || (undriven(seen) != nil && i < 40); i++ {
		t.Run(fmt.Sprintf("seed=%d", seed+i), func(t *testing.T) { runProperty(t, seed+i, seen) })
	}
	checkDriven(t, seen)
}

// runProperty is one run; it adds the records it replayed to seen.
func runProperty(t *testing.T, seed uint64, seen map[string]int) {
	p := newProp(t, seed, nil)
	p.seen = seen
	n := p.n

	// Phase 1: no snapshot, so the WAL holds everything; two cuts are
	// captured on the way for the snapshot-then-WAL replays.
	type cut struct {
		idx     uint64
		section []byte
	}
	var cuts []cut
	for i := range 300 {
		p.step()
		if i == 60 || i == 170 {
			idx, section := p.capture()
			cuts = append(cuts, cut{idx, section})
		}
	}
	_, live := p.capture()
	sameState(t, "WAL-only replay", live, p.replay(nil, 0))
	for _, c := range cuts {
		// A section may reflect records after its index (the System cuts
		// at a barrier while actors keep applying): replaying them again
		// must change nothing, so replay from before the cut too, and from
		// just before the cut's last session turn (record 73).
		for _, back := range []uint64{0, 3, 15, c.idx - p.lastTurnAtOrBefore(c.idx) + 1} {
			from := c.idx - min(back, c.idx)
			what := fmt.Sprintf("snapshot at %d, then WAL replay after %d", c.idx, from)
			sameState(t, what, live, p.replay(c.section, from))
		}
	}
	p.restart("crash, restore from the WAL only", (*actorstest.Node).Crash)

	// Phase 2: through the System's own snapshots, and with other shard
	// counts, so that most keys sit off their id's shard (as keys from
	// older data dirs do) and revocations must find them.
	if _, err := n.Sys.Snapshot(); err != nil {
		t.Fatal(err)
	}
	p.steps(120)
	p.shards = 3
	p.restart("crash, restore from snapshot and WAL on 3 key shards", (*actorstest.Node).Crash)
	p.steps(120)
	p.shards = 5
	p.restart("clean stop and start on 5 key shards", (*actorstest.Node).Stop)
	p.steps(60)
	p.restart("crash, restore from the final snapshot and WAL", (*actorstest.Node).Crash)
}

// newProp starts a node for one property run on seed: entity ids and key
// secrets from seeded sources, blobs (skills, media) in a temp dir, and
// KeyShards read from p.shards at every start; edit (if not nil) changes
// the rest of the config.
func newProp(t *testing.T, seed uint64, edit func(*Config)) *prop {
	t.Helper()
	cfg := DefaultConfig()
	cfg.ToolsExecEnabled = true // custom tools are saved, never run here
	cfg.KeyShards, cfg.MaxTraces, cfg.UsageDays = 4, 6, 3
	cfg.BlobDir = t.TempDir()
	if edit != nil {
		edit(&cfg)
	}
	ids := &sharedIDs{r: rand.New(rand.NewPCG(seed, 1))}
	keyRand := rand.NewChaCha8([32]byte{byte(seed), byte(seed >> 8), byte(seed >> 16), byte(seed >> 24)})
	p := &prop{t: t, r: rand.New(rand.NewPCG(seed, 2)), m: newModel(), shards: cfg.KeyShards}
	p.n = newNode(t, cfg, func(g *Gateway) { g.newID, g.rand, g.cfg.KeyShards = ids.next, keyRand, p.shards })
	ids.other = p.m.otherIDs
	p.gw = start(p.n)
	return p
}

// sameState compares two snapshot sections.
func sameState(tb testing.TB, what string, live, got []byte) {
	tb.Helper()
	if !bytes.Equal(live, got) {
		tb.Errorf("%s differs from the live state in %v (-live +restored):\n%s", what, differing(live, got), cmp.Diff(indent(live), indent(got)))
	}
}

// differing names what differs between two sections: the entity kinds
// and "runs", so a failure says at once which records replay got wrong.
func differing(a, b []byte) []string {
	type section struct {
		Entities []struct {
			Kind string          `json:"kind"`
			Data json.RawMessage `json:"data"`
		} `json:"entities"`
		Runs json.RawMessage `json:"runs"`
	}
	var x, y section
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return []string{"undecodable section"}
	}
	byKind := func(s section) map[string][]string {
		m := map[string][]string{}
		for _, e := range s.Entities {
			m[e.Kind] = append(m[e.Kind], string(e.Data))
		}
		return m
	}
	kx, ky := byKind(x), byKind(y)
	var out []string
	for k := range kx {
		if !slices.Equal(kx[k], ky[k]) {
			out = append(out, k)
		}
	}
	for k := range ky {
		if _, ok := kx[k]; !ok {
			out = append(out, k)
		}
	}
	if !bytes.Equal(x.Runs, y.Runs) {
		out = append(out, "runs")
	}
	slices.Sort(out)
	return out
}

func indent(b []byte) string {
	var out bytes.Buffer
	if err := json.Indent(&out, b, "", " "); err != nil {
		return string(b)
	}
	return out.String()
}

// sharedIDs draws ids unique within a kind but, three times in four, the
// id of a live entity of another kind (live: the model's view), so that
// providers and agents share ids. API key ids are fresh.
type sharedIDs struct {
	mu    sync.Mutex
	r     *rand.Rand
	used  map[kind]map[uuid.UUID]bool
	other func(k kind) []uuid.UUID // live ids of the kinds other than k, sorted
}

func (s *sharedIDs) next(k kind) uuid.UUID {
	s.mu.Lock()
	defer s.mu.Unlock()
	if k != kindProvider && k != kindAgent {
		return s.fresh()
	}
	if s.used == nil {
		s.used = map[kind]map[uuid.UUID]bool{kindProvider: {}, kindAgent: {}}
	}
	var free []uuid.UUID
	for _, id := range s.other(k) {
		if !s.used[k][id] {
			free = append(free, id)
		}
	}
	id := s.fresh()
	if len(free) > 0 && s.r.IntN(4) > 0 {
		id = free[s.r.IntN(len(free))]
	}
	s.used[k][id] = true
	return id
}

func (s *sharedIDs) fresh() uuid.UUID {
	var id uuid.UUID
	for j := range id {
		id[j] = byte(s.r.Uint32())
	}
	return id
}

// prop is one property run: the node, its gateway and the model.
type prop struct {
	t      *testing.T
	r      *rand.Rand
	n      *actorstest.Node
	gw     *Gateway
	m      *model
	shards int // KeyShards of the next start
	// lowered are the budgets whose cap an update set below their spend.
	lowered []uuid.UUID
	// seen counts the replayed records by type and, for 70 and 71, kind
	// ("70 session"), so a run can check that it drove every one.
	seen map[string]int
}

// see counts r in p.seen.
func (p *prop) see(r wal.Record) {
	what := fmt.Sprint(r.Type)
	var e struct {
		Kind string `json:"kind"`
	}
	if json.Unmarshal(r.Data, &e) == nil && e.Kind != "" {
		what += " " + e.Kind
	}
	if p.seen == nil {
		p.seen = map[string]int{}
	}
	p.seen[what]++
}

// driven are the record types and kinds this build writes that every
// run must have replayed at least once (the legacy types 64..69 are only
// decoded, which the golden files pin).
var driven = []string{
	"70 activity", "70 agent", "70 api_key", "70 channel_instance", "70 custom_tool", "70 delegation",
	"70 mcp_grant", "70 mcp_request", "70 mcp_server", "70 media", "70 memory", "70 provider",
	"70 session", "70 skill", "70 skill_grant", "70 skill_version", "70 user_file",
	"71 agent", "71 channel_instance", "71 mcp_server", "71 memory", "71 provider", "71 session",
	"71 skill", "71 skill_grant", "71 skill_version",
	"72", "73", "70 budget", "71 budget", "71 budget_ledger", "74", "75",
}

// checkDriven fails tb if seen misses one of driven.
func checkDriven(tb testing.TB, seen map[string]int) {
	tb.Helper()
	if missing := undriven(seen); missing != nil {
		tb.Errorf("the runs never replayed %q (replayed: %v)", missing, seen)
	}
}

// undriven are the record kinds of driven that seen lacks.
func undriven(seen map[string]int) []string {
	var missing []string
	for _, w := range driven {
		if seen[w] == 0 {
			missing = append(missing, w)
		}
	}
	return missing
}

func (p *prop) steps(k int) {
	for range k {
		p.step()
	}
}

// capture waits for the runs in flight and returns the WAL's last index
// and the live section, which reflects exactly the records up to it.
func (p *prop) capture() (uint64, []byte) {
	p.t.Helper()
	if err := p.gw.syncRuns(ctx(p.t)); err != nil {
		p.t.Fatal(err)
	}
	idx, err := p.n.Log.LastIndex()
	if err != nil {
		p.t.Fatal(err)
	}
	b, err := p.gw.Capture(ctx(p.t))
	if err != nil {
		p.t.Fatal(err)
	}
	return idx, b
}

// replay restores a state as cluster mode's snapshots do (the restore
// path, off the actors: OfflineImage), from section (nil: none) and the
// node's WAL records after idx, and encodes it. It is what a System's
// restore holds too: Restore and Apply run the same state.apply.
func (p *prop) replay(section []byte, idx uint64) []byte {
	p.t.Helper()
	g, err := New(p.gw.cfg)
	if err != nil {
		p.t.Fatal(err)
	}
	oi := g.OfflineImage()
	if err := oi.Restore(section); err != nil {
		p.t.Fatalf("Restore: %v", err)
	}
	err = p.n.Log.Replay(idx, func(seq uint64, r wal.Record) error {
		if !g.Owns(r.Type) {
			return nil
		}
		p.see(r)
		return oi.Apply(seq, r)
	})
	if err != nil {
		p.t.Fatalf("replay after %d: %v", idx, err)
	}
	b, err := oi.Section()
	if err != nil {
		p.t.Fatal(err)
	}
	return b
}

// lastTurnAtOrBefore is the index of the last session turn (record 73)
// in the WAL at or before idx, or idx+1 if there is none.
func (p *prop) lastTurnAtOrBefore(idx uint64) uint64 {
	p.t.Helper()
	last := idx + 1
	err := p.n.Log.Replay(0, func(seq uint64, r wal.Record) error {
		if seq <= idx && r.Type == walSessionTurn {
			last = seq
		}
		return nil
	})
	if err != nil {
		p.t.Fatal(err)
	}
	return last
}

// restart stops the node with stop (crash or clean), starts it again and
// checks that the restored state and every view equal the live ones.
func (p *prop) restart(what string, stop func(*actorstest.Node)) {
	p.t.Helper()
	// Every allowance settled and given back, as a flush interval with no
	// calls does: a crash then has no hold to settle at its full amount
	// (TestBudgetAllowance checks that), and the state must not move.
	if err := p.gw.FlushBudgets(ctx(p.t), true); err != nil {
		p.t.Fatal(err)
	}
	_, live := p.capture()
	before := p.views()
	stop(p.n)
	p.gw = start(p.n)
	_, got := p.capture()
	sameState(p.t, what, live, got)
	if diff := cmp.Diff(before, p.views()); diff != "" {
		p.t.Errorf("%s: views differ (-live +restored):\n%s", what, diff)
	}
	p.checkModel()
}

// views is everything the gateway shows, through its API.
type views struct {
	Providers []Provider
	Agents    map[string][]Agent
	Keys      []APIKey
	Traces    []Trace
	Usage     []UsageRow
	Activity  []Activity
	Budgets   []Budget
}

func (p *prop) views() views {
	p.t.Helper()
	c := ctx(p.t)
	var v views
	var errs [7]error
	v.Budgets, errs[6] = p.gw.ListBudgets(c)
	v.Providers, errs[0] = p.gw.ListProviders(c)
	v.Keys, errs[1] = p.gw.ListAPIKeys(c)
	v.Traces, errs[2] = p.gw.Traces(c, TraceFilter{Limit: 1000})
	v.Usage, errs[3] = p.gw.Usage(c, uuid.Nil, "")
	v.Activity, _, errs[5] = p.gw.Activity(c, ActivityFilter{Limit: 1 << 20})
	v.Agents = map[string][]Agent{}
	for _, u := range users {
		v.Agents[u], errs[4] = p.gw.ListAgents(c, u)
		if errs[4] != nil {
			break
		}
	}
	if err := errors.Join(errs[:]...); err != nil {
		p.t.Fatal(err)
	}
	return v
}

// checkModel compares the live providers, agents and keys with the model.
func (p *prop) checkModel() {
	p.t.Helper()
	c := ctx(p.t)
	ps, err := p.gw.ListProviders(c)
	if err != nil {
		p.t.Fatal(err)
	}
	var got, want []string
	for _, pr := range ps {
		got = append(got, pr.Name+"="+pr.ID.String())
	}
	for _, pr := range p.m.providers {
		want = append(want, pr.name+"="+pr.id.String())
	}
	slices.Sort(want)
	if diff := cmp.Diff(want, got); diff != "" {
		p.t.Errorf("providers differ from the model (-model +live):\n%s", diff)
	}
	for _, u := range users {
		as, err := p.gw.ListAgents(c, u)
		if err != nil {
			p.t.Fatal(err)
		}
		got, want = nil, nil
		for _, a := range as {
			fb := uuid.Nil
			if len(a.Fallbacks) > 0 {
				fb = a.Fallbacks[0].ProviderID
			}
			got = append(got, fmt.Sprintf("%s=%s owner %s on %s shared %v fallback %s", a.AgentKey, a.ID, a.OwnerID, a.ProviderID, a.SharedWith, fb))
		}
		for _, a := range p.m.agents {
			if a.visibleTo(u) {
				want = append(want, fmt.Sprintf("%s=%s owner %s on %s shared %v fallback %s", a.key, a.id, a.owner, a.provider, a.shared, a.fallback))
			}
		}
		slices.Sort(want)
		if diff := cmp.Diff(want, got); diff != "" {
			p.t.Errorf("%s's agents differ from the model (-model +live):\n%s", u, diff)
		}
	}
	p.checkSessions(c)
	now := p.n.Clock.Now()
	for _, k := range p.m.keys {
		_, err := p.gw.Authenticate(c, []byte(k.raw))
		if active := !k.revoked && (k.expires.IsZero() || now.Before(k.expires)); active != (err == nil) {
			p.t.Errorf("Authenticate(key %s) = %v; model: revoked %v, expires %v, now %v", k.id, err, k.revoked, k.expires, now)
		}
	}
}
