package gateway

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"

	"gatehouse/actors"
	"gatehouse/actors/actorstest"
	"gatehouse/wal"
)

// TestApplyLiveEqualsWriter is cluster mode's sharing in one process: node
// A runs random commands over the whole domain (TestLiveEqualsRestore's),
// and node B, another actor system with its own WAL, gets A's records
// through ApplyLive in log order, as it would from the replicated log. B's
// state (its snapshot section) and everything it shows through the API
// must equal A's; A's model checks B too. A second B gets every record
// twice (the same seq): the second must change nothing.
func TestApplyLiveEqualsWriter(t *testing.T) {
	seed := *propSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (rerun with -seed %d)", seed, seed)
	seen := map[string]int{}
	for i := range uint64(3) {
		t.Run(fmt.Sprintf("seed=%d", seed+i), func(t *testing.T) {
			p := newProp(t, seed+i, nil)
			p.steps(300)
			_, want := p.capture()
			wantViews := liveViews(p, p.gw)
			for _, times := range []int{1, 2} {
				_, b := liveNode(t, p)
				feed(t, p.n, b, times, seen)
				got, err := b.Capture(ctx(t))
				if err != nil {
					t.Fatal(err)
				}
				what := fmt.Sprintf("B after ApplyLive of A's records (each %d times)", times)
				sameState(t, what, want, got)
				if diff := cmp.Diff(wantViews, liveViews(p, b)); diff != "" {
					t.Errorf("%s: views differ (-A +B):\n%s", what, diff)
				}
				a := p.gw
				p.gw = b
				p.checkModel()
				p.gw = a
			}
		})
	}
	checkDriven(t, seen)
}

// liveNode starts node B for p's node A: the same config and clock, its
// own data dir and blob store.
func liveNode(t *testing.T, p *prop) (*actorstest.Node, *Gateway) {
	t.Helper()
	cfg := p.gw.cfg
	cfg.BlobDir = t.TempDir()
	n := actorstest.New(t, actorstest.WithClock(p.n.Clock), actorstest.WithExtensions(func() []actors.Extension {
		gw, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return []actors.Extension{gw}
	}))
	return n, start(n)
}

// feed gives to every gateway record of from's WAL, in order, times
// times each, and counts them in seen.
func feed(t *testing.T, from *actorstest.Node, to *Gateway, times int, seen map[string]int) {
	t.Helper()
	err := from.Log.Replay(0, func(seq uint64, r wal.Record) error {
		if !to.Owns(r.Type) {
			return nil
		}
		(&prop{seen: seen}).see(r)
		for range times {
			if err := to.ApplyLive(ctx(t), seq, r); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// allViews is what TestLiveEqualsRestore compares after a restart, and
// the reads of the kinds its views leave out.
type allViews struct {
	Views       views
	Sessions    map[string][]Session
	Memory      []MemoryEntry
	MCPServers  []MCPServer
	MCPRequests []MCPRequest
	MCPGrants   map[string][]MCPGrant
	Skills      []Skill
	Channels    []ChannelInstance
	Tools       map[uuid.UUID][]CustomTool
	Delegations []Delegation
	Instances   map[string][]Instance
	UserFiles   map[string][]ContextFile
	Media       map[uuid.UUID]Media
}

// liveViews reads everything gw shows (p's users and agents).
func liveViews(p *prop, gw *Gateway) allViews {
	p.t.Helper()
	c := ctx(p.t)
	a := p.gw
	p.gw = gw
	v := allViews{Views: p.views(), Sessions: map[string][]Session{}, MCPGrants: map[string][]MCPGrant{},
		Tools: map[uuid.UUID][]CustomTool{}, Instances: map[string][]Instance{}, UserFiles: map[string][]ContextFile{},
		Media: map[uuid.UUID]Media{}}
	p.gw = a
	must := func(err error) {
		p.t.Helper()
		if err != nil {
			p.t.Fatal(err)
		}
	}
	var err error
	for _, u := range users {
		ss, _, err := gw.ListSessions(c, SessionFilter{UserID: u, Limit: 200}, false)
		must(err)
		for _, s := range ss {
			full, err := gw.SessionOp(c, "get", s.Key, u, false, nil)
			must(err)
			v.Sessions[u] = append(v.Sessions[u], full)
		}
	}
	v.Memory, _, err = gw.Memory(c, MemoryFilter{Limit: 1 << 20})
	must(err)
	v.MCPServers, err = gw.ListMCPServers(c)
	must(err)
	v.MCPRequests, err = gw.MCPRequests(c, "", "")
	must(err)
	v.Skills, err = gw.ListSkills(c, SkillFilter{Viewer: EveryUser})
	must(err)
	v.Channels, err = gw.ListChannels(c)
	must(err)
	v.Delegations, _, err = gw.Delegations(c, DelegationFilter{Limit: 1 << 20})
	must(err)
	agents := map[uuid.UUID]Agent{}
	for _, u := range users {
		for _, ag := range v.Views.Agents[u] {
			agents[ag.ID] = ag
		}
	}
	for id, ag := range agents {
		v.Tools[id], err = gw.ListCustomTools(c, id)
		must(err)
		v.MCPGrants[ag.AgentKey], err = gw.AgentMCPGrants(c, id.String())
		must(err)
		v.Instances[ag.AgentKey], err = gw.Instances(c, ag.OwnerID, id.String())
		must(err)
		for _, u := range users {
			v.UserFiles[ag.AgentKey+"/"+u], err = gw.UserFiles(c, ag.OwnerID, id.String(), u)
			must(err)
		}
	}
	for _, id := range mediaIDs(p) {
		m, err := gw.GetMedia(c, id)
		if err == nil {
			v.Media[id] = m
		}
	}
	return v
}

// mediaIDs are the ids of the media p's node saved.
func mediaIDs(p *prop) []uuid.UUID {
	var ids []uuid.UUID
	err := p.n.Log.Replay(0, func(_ uint64, r wal.Record) error {
		if r.Type != recEntitySaved {
			return nil
		}
		ev, err := decodeEvent(r)
		if err != nil {
			return err
		}
		if m, ok := ev.(entitySaved).ent.(*mediaRec); ok {
			ids = append(ids, m.ID)
		}
		return nil
	})
	if err != nil {
		p.t.Fatal(err)
	}
	slices.SortFunc(ids, cmpUUID)
	return slices.Compact(ids)
}
