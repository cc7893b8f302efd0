package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Cases of the suite, as -cases names them.
const (
	CaseProxy     = "proxy"     // the proxy throughput table (Suite)
	CaseIsolation = "isolation" // the agent gateway's noisy neighbour (AgentSuite)
	CaseTurn      = "turn"      // the agent gateway's cost of a chat turn (AgentSuite)
	CaseHalves    = "halves"    // the key service's /health beside a burst of 1 MB chats (AgentSuite)
)

// AgentConfig is one run of the agent-gateway cases (issue 20).
type AgentConfig struct {
	Isolation bool // run the noisy-neighbour case
	Turn      bool // run the turn-cost case
	Halves    bool // run the two-halves case
	Iso       IsolationConfig
	Half      HalvesConfig
	Turns     int // sequential chat turns measured
	// TurnSettle is the quiet time before and after the turns, so that
	// the records the gateway writes in batches (usage, traces: flushed
	// every second) land inside the WAL count.
	TurnSettle time.Duration
	// Dir receives configs, data and the servers' logs.
	Dir string
	// Vs, when set, is a git revision: gatehouse built from it runs every
	// case beside the working tree's, phase by phase.
	Vs  string
	Log io.Writer
}

// DefaultAgentConfig is what `make bench` runs: both cases, about a
// minute per gatehouse.
func DefaultAgentConfig() AgentConfig {
	return AgentConfig{Isolation: true, Turn: true, Halves: true, Iso: DefaultIsolationConfig(), Half: DefaultHalvesConfig(), Turns: 1_000, TurnSettle: 2 * time.Second}
}

// Validate reports the first invalid field, by name.
func (c AgentConfig) Validate() error {
	switch {
	case !c.Isolation && !c.Turn && !c.Halves:
		return errors.New("bench: no agent case selected")
	case c.Turn && (c.Turns < 1 || c.TurnSettle < 0):
		return errors.New("bench: turns must be >= 1 and turn_settle >= 0")
	case c.Dir == "":
		return errors.New("bench: dir is required")
	}
	if c.Halves {
		if err := c.Half.Validate(); err != nil {
			return err
		}
	}
	if c.Isolation {
		return c.Iso.Validate()
	}
	return nil
}

// halvesRounds is how many times each gatehouse takes the two-halves
// burst, the gatehouses alternating.
const halvesRounds = 2

// turnRounds is how many slices the turns are cut in, the gatehouses
// taking turns slice by slice.
const turnRounds = 10

// agentGW is one gatehouse under the agent cases.
type agentGW struct {
	name     string
	addr     string
	api      string // its key service's listener
	metrics  string // its /metrics listener
	baseline bool
	keys     map[string]string // API keys by user
}

// AgentSuite runs the agent cases against gatehouse built from the working
// tree and, with Vs, from a git revision, each its own process on loopback.
type AgentSuite struct {
	cfg        AgentConfig
	procs      []*Proc
	gws        []*agentGW
	stub       *halvesStub // the two-halves case's upstream
	Isolations []*Isolation
	Turns      []*Turns
	Halves     []*Halves
}

// StartAgents builds and starts the gatehouses and provisions each with
// the echo provider and the cases' users (an agent and an API key each).
func StartAgents(ctx context.Context, cfg AgentConfig) (_ *AgentSuite, err error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &AgentSuite{cfg: cfg}
	defer func() {
		if err != nil {
			s.Stop()
		}
	}()
	type build struct {
		name, dir, rev string
	}
	builds := []build{{"gatehouse", filepath.Join(cfg.Dir, "agents"), ""}}
	if cfg.Vs != "" {
		builds = append(builds, build{"gatehouse@" + cfg.Vs, filepath.Join(cfg.Dir, "agents-vs"), cfg.Vs})
	}
	for _, b := range builds {
		if err := os.MkdirAll(b.dir, 0o755); err != nil {
			return nil, err
		}
		s.logf("building and starting %s (agent gateway)", b.name)
		var bin string
		if b.rev == "" {
			bin, err = BuildGatehouse(b.dir)
		} else {
			bin, err = BuildGatehouseAt(b.rev, b.dir)
		}
		if err != nil {
			return nil, err
		}
		p, a, err := startGatewayAddrs(bin, b.dir)
		if err != nil {
			return nil, err
		}
		s.procs = append(s.procs, p)
		if cfg.Iso.Pin {
			out, err := pinServer(p)
			if err != nil {
				return nil, err
			}
			s.logf("%s: %s", b.name, strings.ReplaceAll(out, "\n", "; "))
		}
		keys, err := provisionUsers(ctx, a.gateway, turnUser, quietUser, noisyUser)
		if err == nil && cfg.Halves {
			if s.stub == nil {
				if s.stub, err = startHalvesStub(); err != nil {
					return nil, err
				}
			}
			keys[halvesUser], err = provisionStubAgent(ctx, a.gateway, "bench-stub", s.stub.base(), halvesUser)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", b.name, err)
		}
		s.gws = append(s.gws, &agentGW{name: b.name, addr: a.gateway, api: a.api, metrics: a.metrics, baseline: b.rev != "", keys: keys})
	}
	return s, nil
}

// Run runs the selected cases: the turns first, on a quiet gateway (in
// rounds, the gatehouses interleaved), then
// the noisy neighbour (its saves, then each phase on every gatehouse in
// turn, so that both builds meet the same moment as closely as they can).
// A case that fails outright is recorded and the suite goes on.
func (s *AgentSuite) Run(ctx context.Context) error {
	if s.cfg.Turn {
		for _, g := range s.gws {
			tr := NewTurns(g.name, g.addr, g.metrics, g.keys[turnUser])
			tr.Baseline = g.baseline
			s.Turns = append(s.Turns, tr)
		}
		RunTurns(ctx, s.Turns, s.cfg.Turns, turnRounds, s.cfg.TurnSettle)
		for _, tr := range s.Turns {
			s.logf("%v", tr)
		}
	}
	if s.cfg.Halves {
		s.runHalves(ctx)
	}
	if !s.cfg.Isolation {
		return ctx.Err()
	}
	var live []*Isolation
	for _, g := range s.gws {
		s.logf("%s: the noisy user saves %d memory entries", g.name, s.cfg.Iso.Entries)
		iso, err := PrepareIsolation(ctx, g.name, g.addr, g.keys, s.cfg.Iso)
		iso.Baseline = g.baseline
		s.Isolations = append(s.Isolations, iso)
		if err != nil {
			iso.Failed = err
			s.logf("%s: %v", g.name, err)
			continue
		}
		s.logf("%s: saved %d entries in %v", g.name, iso.Saved, iso.SaveTime.Round(1e6))
		live = append(live, iso)
	}
	for _, noisy := range []bool{false, true} {
		for _, iso := range live {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			st := iso.RunPhase(ctx, noisy, s.cfg.Iso)
			if noisy {
				iso.Noisy = st
			} else {
				iso.Alone = st
			}
			s.logf("isolation %-28s %s", iso.Name, st.line(noisy))
		}
	}
	return ctx.Err()
}

// runHalves runs the two-halves case on every gatehouse, in
// halvesRounds rounds with the gatehouses alternating.
func (s *AgentSuite) runHalves(ctx context.Context) {
	for _, g := range s.gws {
		s.Halves = append(s.Halves, &Halves{Name: g.name, Baseline: g.baseline, api: g.api, gateway: g.addr, key: g.keys[halvesUser]})
	}
	for range halvesRounds {
		for _, h := range s.Halves {
			if ctx.Err() != nil {
				return
			}
			h.Run(ctx, s.cfg.Half)
			s.logf("halves %-28s /health quiet p50 %v p95 %v | loaded p50 %v p95 %v max %v | chats %d failed %d in %v",
				h.Name, h.Quiet.Quantile(0.5), h.Quiet.Quantile(0.95), h.Loaded.Quantile(0.5), h.Loaded.Quantile(0.95), h.Loaded.Max(),
				h.Sent, h.ChatFailed, h.BurstTime.Round(time.Millisecond))
		}
	}
}

// Stop stops every gatehouse, the last started first, and the stub.
func (s *AgentSuite) Stop() {
	for i := len(s.procs) - 1; i >= 0; i-- {
		s.procs[i].Stop()
	}
	s.procs = nil
	if s.stub != nil {
		s.stub.close()
		s.stub = nil
	}
}

func (s *AgentSuite) logf(format string, args ...any) {
	if s.cfg.Log != nil {
		fmt.Fprintf(s.cfg.Log, format+"\n", args...)
	}
}

// line is one phase for the progress log.
func (st *QuietStats) line(noisy bool) string {
	what := "alone     "
	if noisy {
		what = "neighbour "
	}
	return fmt.Sprintf("%s agents p50 %v p99 %v max %v failed %d | chat p50 %v p99 %v max %v failed %d | searches %d failed %d",
		what, st.Agents.Quantile(0.5), st.Agents.Quantile(0.99), st.Agents.Max(), st.AgentsFailed,
		st.Chat.Quantile(0.5), st.Chat.Quantile(0.99), st.Chat.Max(), st.ChatFailed, st.Searches, st.SearchesFailed)
}
