package gateway

import (
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
)

// clusterNode is one node of a simulated cluster on an
// actorstest.SharedLog (cluster mode's replicated log in one process): a
// System with a Gateway appending to the shared log, and its follower
// applying the other nodes' records (and its own budget holds, which the
// gateway applies in log order: OwnApplier).
type clusterNode struct {
	name string
	gw   *Gateway
	f    *actorstest.Follower
}

// nodeLog is name's EventLog on log, for Gateway.wrapLog.
func nodeLog(log *actorstest.SharedLog, name string) func(actors.EventLog) actors.EventLog {
	return func(l actors.EventLog) actors.EventLog { return log.Node(name, l) }
}

// startCluster starts names' nodes on one shared log, their followers
// running until the test ends.
func startCluster(t *testing.T, seed uint64, names ...string) (*actorstest.SharedLog, []*clusterNode) {
	t.Helper()
	log := actorstest.NewSharedLog()
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
			g.wrapLog = nodeLog(log, name)
		})
		n.Clock = clk
		cn := &clusterNode{name: name, gw: start(n)}
		cn.f = log.Follow(t, name, cn.gw)
		nodes = append(nodes, cn)
	}
	return log, nodes
}

// settle waits until every node's runs are logged and every follower has
// reached the end of the log.
func settle(t *testing.T, log *actorstest.SharedLog, nodes []*clusterNode) {
	t.Helper()
	var fs []*actorstest.Follower
	for _, cn := range nodes {
		if err := cn.gw.syncRuns(ctx(t)); err != nil {
			t.Fatal(err)
		}
		fs = append(fs, cn.f)
	}
	log.Settle(t, fs...)
}

// replayShared is the state a restore from the shared log alone holds.
func replayShared(t *testing.T, log *actorstest.SharedLog) []byte {
	t.Helper()
	g, err := New(DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Restore(nil); err != nil {
		t.Fatal(err)
	}
	log.Replay(t, g.Apply)
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
	// The seeds run on clusters of their own, in parallel.
	for seed := range uint64(3) {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) { t.Parallel(); clusterConverges(t, seed) })
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
