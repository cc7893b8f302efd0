package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"gatehouse/actors"
	"gatehouse/actors/actorstest"
	"gatehouse/actors/clock"
	"gatehouse/wal"
)

// sharedLog stands for cluster mode's replicated log in one process: one
// order of every node's appends (seq = position), which each node's
// follower reads.
type sharedLog struct {
	mu   sync.Mutex
	recs []sharedRec
	more chan struct{} // closed at the next append
}

type sharedRec struct {
	writer string
	rec    wal.Record
}

func newSharedLog() *sharedLog { return &sharedLog{more: make(chan struct{})} }

// append adds recs as writer's batch and returns the last one's seq.
func (l *sharedLog) append(writer string, recs []wal.Record) uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, r := range recs {
		l.recs = append(l.recs, sharedRec{writer, wal.Record{Type: r.Type, Data: slices.Clone(r.Data)}})
	}
	close(l.more)
	l.more = make(chan struct{})
	return uint64(len(l.recs))
}

// from returns the records after position pos, and a channel closed at the
// next append.
func (l *sharedLog) from(pos int) ([]sharedRec, <-chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.recs[pos:], l.more
}

// nodeLog is one node's EventLog in the cluster: its own WAL (durable
// locally), then the shared log, whose seq the actors get.
type nodeLog struct {
	inner  actors.EventLog
	shared *sharedLog
	writer string
}

func (n nodeLog) Append(recs ...wal.Record) (uint64, error) {
	if _, err := n.inner.Append(recs...); err != nil {
		return 0, err
	}
	return n.shared.append(n.writer, recs), nil
}

func (n nodeLog) AppendAsync(recs []wal.Record, done func(uint64, error)) {
	n.inner.AppendAsync(recs, func(_ uint64, err error) {
		if err != nil {
			done(0, err)
			return
		}
		done(n.shared.append(n.writer, recs), nil)
	})
}

// clusterNode is one node of a simulated cluster: a System with a Gateway
// appending to the shared log, and its follower applying the other
// nodes' records.
type clusterNode struct {
	name    string
	gw      *Gateway
	mu      sync.Mutex
	applied int // shared log position the follower reached
}

// startCluster starts names' nodes on one shared log, their followers
// running until the test ends.
func startCluster(t *testing.T, seed uint64, names ...string) (*sharedLog, []*clusterNode) {
	t.Helper()
	log := newSharedLog()
	clk := clock.NewFake(actorstest.T0)
	var nodes []*clusterNode
	for i, name := range names {
		cfg := DefaultConfig()
		cfg.KeyShards, cfg.TenantShards = 4+i, 3+i // each node its own layout: routing is per node
		n := newNode(t, cfg, func(g *Gateway) {
			ids := rand.New(rand.NewPCG(seed, uint64(i)))
			g.newID = func(kind) uuid.UUID {
				var id uuid.UUID
				for j := range id {
					id[j] = byte(ids.Uint32())
				}
				return id
			}
			g.wrapLog = func(l actors.EventLog) actors.EventLog { return nodeLog{l, log, name} }
		})
		n.Clock = clk
		cn := &clusterNode{name: name, gw: start(n)}
		nodes = append(nodes, cn)
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		wg.Go(func() { cn.follow(ctx, t, log) })
		t.Cleanup(func() { cancel(); wg.Wait() })
	}
	return log, nodes
}

// follow applies the other nodes' records in log order until ctx ends.
func (cn *clusterNode) follow(ctx context.Context, t *testing.T, log *sharedLog) {
	pos := 0
	for {
		recs, more := log.from(pos)
		for _, r := range recs {
			pos++
			if r.writer != cn.name || cn.gw.AppliesOwn(r.rec.Type) { // as actors' follower does
				if err := cn.gw.ApplyLive(ctx, uint64(pos), r.rec); err != nil {
					if ctx.Err() == nil {
						t.Errorf("%s: ApplyLive(%d): %v", cn.name, pos, err)
					}
					return
				}
			}
			cn.mu.Lock()
			cn.applied = pos
			cn.mu.Unlock()
		}
		select {
		case <-ctx.Done():
			return
		case <-more:
		}
	}
}

// settle waits until every node's runs are logged and every follower has
// reached the end of the log.
func settle(t *testing.T, log *sharedLog, nodes []*clusterNode) {
	t.Helper()
	for _, cn := range nodes {
		if err := cn.gw.syncRuns(ctx(t)); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for _, cn := range nodes {
		for {
			all, _ := log.from(0)
			cn.mu.Lock()
			done := cn.applied == len(all)
			cn.mu.Unlock()
			if done {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s's follower did not reach the end of the log", cn.name)
			}
			time.Sleep(time.Millisecond)
		}
	}
}

// replayShared is the state a restore from the shared log alone holds.
func replayShared(t *testing.T, log *sharedLog) []byte {
	t.Helper()
	g, err := New(DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Restore(nil); err != nil {
		t.Fatal(err)
	}
	all, _ := log.from(0)
	for i, r := range all {
		if err := g.Apply(uint64(i+1), r.rec); err != nil {
			t.Fatal(err)
		}
	}
	return g.st.encode()
}

// TestClusterNodesConverge runs two nodes on one shared log, as cluster
// mode does: both change the same providers, agents, MCP servers, keys and
// memory at the same time, each runs turns on its own sessions and
// records runs, and each applies the other's records live. Afterwards
// both hold the state a replay of the log holds: concurrent writes of one
// entity end with the newest record on every node (liveMarks), and every
// run counts on every node.
func TestClusterNodesConverge(t *testing.T) {
	for seed := range uint64(3) {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) { clusterConverges(t, seed) })
	}
}

func clusterConverges(t *testing.T, seed uint64) {
	log, nodes := startCluster(t, seed, "A", "B")
	a := nodes[0].gw
	c := ctx(t)
	var provs, agents []string
	for i := range 3 {
		p := fmt.Sprint("p", i)
		if _, err := a.CreateProvider(c, ProviderInput{Name: p, ProviderType: ProviderEcho, Enabled: true}); err != nil {
			t.Fatal(err)
		}
		provs = append(provs, p)
	}
	for i := range 4 {
		k := fmt.Sprint("a", i)
		if _, err := a.CreateAgent(c, "alice", AgentInput{AgentKey: &k, Provider: &provs[i%3], Model: ptr("m")}); err != nil {
			t.Fatal(err)
		}
		agents = append(agents, k)
	}
	if _, err := a.CreateMCPServer(c, MCPServerInput{Name: ptr("files"), Transport: ptr("streamable-http"), URL: ptr("http://127.0.0.1:1/mcp")}); err != nil {
		t.Fatal(err)
	}
	var keys []uuid.UUID
	for i := range 6 {
		k, _, err := a.CreateAPIKey(c, NewAPIKey{Name: fmt.Sprint("k", i), Scopes: []Scope{ScopeRead}, UserID: "alice"})
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, k.ID)
	}
	settle(t, log, nodes)

	runAgents := []uuid.UUID{uuid.New(), uuid.New()}
	var wg sync.WaitGroup
	for ni, cn := range nodes {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(seed, uint64(100+ni)))
			gw := cn.gw
			var mems []uuid.UUID
			for i := range 150 {
				tag := fmt.Sprintf("%s-%d", cn.name, i)
				var err error
				switch r.IntN(9) {
				case 0:
					_, err = gw.UpdateProvider(c, provs[r.IntN(3)], ProviderInput{DisplayName: tag, ProviderType: ProviderEcho, Enabled: true})
				case 1:
					_, err = gw.UpdateAgent(c, "alice", agents[r.IntN(4)], AgentInput{SystemPrompt: &tag})
				case 2:
					_, err = gw.UpdateMCPServer(c, "files", MCPServerInput{Enabled: ptr(r.IntN(2) == 0), ToolPrefix: &tag})
				case 3:
					err = gw.RevokeAPIKey(c, keys[r.IntN(len(keys))])
				case 4:
					_, _, err = gw.CreateAPIKey(c, NewAPIKey{Name: tag, Scopes: []Scope{ScopeRead}, UserID: "bob"})
				case 5:
					var m MemoryEntry
					m, err = gw.SaveMemory(c, MemoryInput{Content: "note " + tag, Agent: agents[r.IntN(4)], UserID: "alice"})
					mems = append(mems, m.ID)
				case 6:
					if len(mems) > 0 {
						err = gw.DeleteMemory(c, mems[r.IntN(len(mems))], "")
					}
				case 7:
					key := fmt.Sprintf("%s-s%d", cn.name, r.IntN(3)) // each node its own sessions
					if _, err = gw.BeginTurn(c, key, agents[r.IntN(4)], "alice", "http", func() {}); err == nil {
						_, err = gw.EndTurn(c, "alice", key, TurnResult{User: "q " + tag, Assistant: "a", PromptTokens: 2})
					}
				case 8:
					at := actorstest.T0.Add(time.Duration(r.IntN(180)) * time.Minute) // runs finish out of their start order
					gw.RecordRun(Trace{ID: tag, AgentID: runAgents[r.IntN(2)], UserID: users[r.IntN(2)], Endpoint: "chat", Status: RunOK, StartedAt: at,
						Spans: []Span{{Name: "llm", Kind: SpanLLM, StartedAt: at, PromptTokens: int64(r.IntN(9)), Status: RunOK}}})
				}
				if err != nil && !errors.Is(err, ErrNotFound) && !errors.Is(err, ErrInvalid) {
					t.Errorf("%s step %d: %v", cn.name, i, err)
				}
			}
		})
	}
	wg.Wait()
	settle(t, log, nodes)

	want := tracesByID(t, replayShared(t, log))
	for _, cn := range nodes {
		got, err := cn.gw.Capture(ctx(t))
		if err != nil {
			t.Fatal(err)
		}
		sameState(t, cn.name+"'s state (-replay of the shared log +live)", want, tracesByID(t, got))
	}
}

// tracesByID is section with its traces sorted by id: a node lists traces
// in the order it applied the runs, its own as they commit, the others'
// as they arrive (doc.go), so two nodes may order runs logged at about
// the same time differently; which runs, their usage and instances are
// the same.
func tracesByID(t *testing.T, section []byte) []byte {
	t.Helper()
	var sec map[string]json.RawMessage
	var runs map[string]json.RawMessage
	var traces []runRec
	if err := json.Unmarshal(section, &sec); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(sec["runs"], &runs); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(runs["traces"], &traces); err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(traces, func(x, y runRec) int { return strings.Compare(x.ID, y.ID) })
	runs["traces"] = mustJSON(traces)
	sec["runs"] = mustJSON(runs)
	return mustJSON(sec)
}
