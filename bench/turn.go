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
}

// RunTurns sends n sequential chat completions as turnUser with its key
// (after 5 unmeasured ones) to the gateway at addr, and reads the WAL's
// counter from the /metrics listener at metrics settle before the first
// measured turn and settle after the last.
func RunTurns(ctx context.Context, name, addr, metrics, key string, n int, settle time.Duration) *Turns {
	tr := &Turns{Name: name, WALPerTurn: math.NaN()}
	c := newGWClient(addr, key, turnUser, 1, 30*time.Second)
	defer c.close()
	turn := func(i int) error {
		return c.do(ctx, "POST", "/v1/chat/completions", chatBody(turnUser, "turn "+strconv.Itoa(i)+": what is next?"), 200, nil)
	}
	for i := range 5 {
		_ = turn(-1 - i)
	}
	sleepCtx(ctx, settle)
	before, okBefore := walRecords(ctx, metrics)
	for i := range n {
		if ctx.Err() != nil {
			break
		}
		t0 := time.Now()
		err := turn(i)
		tr.Latency.Record(time.Since(t0))
		if err != nil {
			tr.Failed++
			if tr.FirstErr == nil {
				tr.FirstErr = err
			}
		}
	}
	sleepCtx(ctx, settle)
	if after, ok := walRecords(ctx, metrics); ok && okBefore && n > 0 {
		tr.WALPerTurn = (after - before) / float64(n)
	}
	return tr
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
