package bench

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Turns is one gatehouse's turn-cost case (issue 20): sequential chat
// completions of one user with an agent on the echo provider, so that
// what is measured is the gateway's own work per turn.
type Turns struct {
	Name     string
	Baseline bool // built from Config.Vs: reported, not judged
	Latency  Histogram
	Failed   int
	FirstErr error
	// WALPerTurn is gatehouse_wal_appended_records_total's increase over
	// the measured turns and the settle time after them, per turn (the
	// whole process, batched records included); NaN if /metrics did not
	// have it.
	WALPerTurn float64
	// RegistryAsksPerTurn is gatehouse_gateway_actor_asks_total{actor=
	// "registry"}'s increase over the measured turns, per turn, read from
	// the gateway's own /metrics; NaN for a build without the counter.
	RegistryAsksPerTurn float64

	metrics string
	c       *gwClient
}

// NewTurns returns the turn-cost case of the gateway at addr, for
// turnUser with its key; metrics is the process's /metrics listener.
func NewTurns(name, addr, metrics, key string) *Turns {
	return &Turns{Name: name, WALPerTurn: math.NaN(), RegistryAsksPerTurn: math.NaN(), metrics: metrics,
		c: newGWClient(addr, key, turnUser, 1, 30*time.Second)}
}

// RunTurns measures n sequential chat turns on each of trs, in rounds
// with the gatehouses interleaved (so that a -vs comparison meets the
// same moments), after 5 unmeasured turns each; it reads the WAL's
// counter settle after the warm-up and again settle after the last round.
func RunTurns(ctx context.Context, trs []*Turns, n, rounds int, settle time.Duration) {
	rounds = max(min(rounds, n), 1)
	before, asksBefore := make([]float64, len(trs)), make([]float64, len(trs))
	okBefore, asksOK := make([]bool, len(trs)), make([]bool, len(trs))
	for _, tr := range trs {
		for i := range 5 {
			_ = tr.turn(ctx, -1-i)
		}
	}
	sleepCtx(ctx, settle)
	for i, tr := range trs {
		before[i], okBefore[i] = walRecords(ctx, tr.metrics)
		asksBefore[i], asksOK[i] = tr.registryAsks(ctx)
	}
	for r := range rounds {
		for _, tr := range trs {
			tr.run(ctx, n*(r+1)/rounds-n*r/rounds)
		}
	}
	sleepCtx(ctx, settle)
	for i, tr := range trs {
		if after, ok := walRecords(ctx, tr.metrics); ok && okBefore[i] && n > 0 {
			tr.WALPerTurn = (after - before[i]) / float64(n)
		}
		if after, ok := tr.registryAsks(ctx); ok && asksOK[i] && n > 0 {
			tr.RegistryAsksPerTurn = (after - asksBefore[i]) / float64(n)
		}
		tr.c.close()
	}
}

// run measures n sequential turns.
func (tr *Turns) run(ctx context.Context, n int) {
	for range n {
		if ctx.Err() != nil {
			return
		}
		t0 := time.Now()
		err := tr.turn(ctx, int(tr.Latency.Count()))
		tr.Latency.Record(time.Since(t0))
		if err != nil {
			tr.Failed++
			if tr.FirstErr == nil {
				tr.FirstErr = err
			}
		}
	}
}

func (tr *Turns) turn(ctx context.Context, i int) error {
	return tr.c.do(ctx, "POST", "/v1/chat/completions", chatBody(turnUser, "turn "+strconv.Itoa(i)+": what is next?"), 200, nil)
}

// registryAsks reads the registry's asks from the gateway's /metrics
// (with the turns' key); false when the build has no such counter.
func (tr *Turns) registryAsks(ctx context.Context) (float64, bool) {
	var text []byte
	if err := tr.c.do(ctx, "GET", "/metrics", nil, 200, &text); err != nil {
		return 0, false
	}
	return promValue(text, `gatehouse_gateway_actor_asks_total{actor="registry"}`)
}

// walRecords reads gatehouse_wal_appended_records_total from the
// /metrics listener at addr.
func walRecords(ctx context.Context, addr string) (float64, bool) {
	c := newGWClient(addr, "", "", 1, 10*time.Second)
	defer c.close()
	var text []byte
	if err := c.do(ctx, "GET", "/metrics", nil, 200, &text); err != nil {
		return 0, false
	}
	return promValue(text, "gatehouse_wal_appended_records_total")
}

// promValue sums the samples of metric in Prometheus text exposition.
func promValue(text []byte, metric string) (float64, bool) {
	var sum float64
	found := false
	sc := bufio.NewScanner(bytes.NewReader(text))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), metric)
		switch {
		case !ok:
			continue
		case strings.HasPrefix(rest, "{"):
			i := strings.LastIndexByte(rest, '}')
			if i < 0 {
				continue
			}
			rest = rest[i+1:]
		case !strings.HasPrefix(rest, " "):
			continue // another metric whose name starts with this one
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			continue
		}
		sum += v
		found = true
	}
	return sum, found
}

// String is one line for the suite's progress log.
func (tr *Turns) String() string {
	return fmt.Sprintf("turns %-28s n %d  p50 %v  p99 %v  max %v  failed %d  WAL records/turn %.2f", tr.Name, tr.Latency.Count(),
		tr.Latency.Quantile(0.5), tr.Latency.Quantile(0.99), tr.Latency.Max(), tr.Failed, tr.WALPerTurn)
}
