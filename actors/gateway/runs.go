package gateway

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"gatehouse/actors"
	"gatehouse/wal"
)

// runsActor owns the run traces and the usage per agent/user/day (its
// runState). A run is appended asynchronously (the reply to the client
// never waits for it); the commit notice applies it, so a snapshot sees
// exactly the runs whose records precede its barrier, and the watermark
// makes replay exact.
//
// Runs are gathered for up to runLinger (or runBatch runs) and appended
// together, one record each, in one AppendAsync: one WAL commit and
// fdatasync per batch instead of per run. With one client calling in a
// loop each run used to be a commit of its own, and the commit was a
// quarter of the streamed chat path's CPU (issue 35). A run is durable
// within runLinger plus one group commit.
type runsActor struct {
	log  actors.EventLog
	lg   *slog.Logger
	root *actor.RootContext
	self *actor.PID
	part *runState

	recorded, committed uint64 // runs sent to the WAL, and answered by it
	waiters             []runsWaiter
	pending             []*runRec // gathered, not yet sent to the WAL
	armed               bool      // a flushRuns is due within runLinger
	// view receives the traces after each applied run: trace reads scan
	// it in their caller's goroutine (see runState.dropOldest).
	view *atomic.Pointer[[]*runRec]
	// unapplied is Gateway.unapplied: RecordRun adds, the commit notice
	// takes away.
	unapplied *atomic.Int64
}

// publish makes the current traces the readers' view.
func (a *runsActor) publish() {
	ts := a.part.traces
	a.view.Store(&ts)
}

// runLinger bounds how long a finished run waits, gathered with the
// runs that finish after it, before its record is appended; runBatch
// bounds the runs of one append. A bbolt commit writes its pages and its
// meta page with an fdatasync each: with one client calling in a loop
// (a run every 0.2-0.4 ms) 2 ms still left the WAL at 11 % of a call's
// CPU; 10 ms gathers 25-50 runs a commit. Both are far below what the
// other asynchronous records may wait (usage.flush_interval, 1 s by
// default).
const (
	runLinger = 10 * time.Millisecond
	runBatch  = 256
)

type recordRun struct{ run *runRec }

// flushRuns appends the gathered runs (runLinger after the first).
type flushRuns struct{}

// runsCommitted answers the append of runs, whose records end at last.
type runsCommitted struct {
	last uint64
	runs []*runRec
	err  error
}

// syncRuns is answered once every run recorded before it is applied (or
// failed to log): tests wait on it instead of polling.
type syncRuns struct{ reply chan struct{} }

// runsWaiter is answered (done) once the runs up to upto are applied.
type runsWaiter struct {
	upto uint64
	done func()
}

type queryUsage struct {
	q     UsageQuery
	reply chan []usageRec
}

type captureRuns struct{ reply chan runsImage }

// Receive is the runs actor's mailbox entry point.
func (a *runsActor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case recordRun:
		a.record(m.run)
	case flushRuns:
		a.armed = false
		a.flush()
	case runsCommitted:
		a.committedRuns(m)
	case syncRuns:
		a.after(func() { close(m.reply) })
	case queryUsage:
		a.after(func() { m.reply <- a.usage(m) })
	case captureRuns:
		m.reply <- a.part.image()
	case queryInstances:
		a.after(func() { m.reply <- a.part.instancesOf(m.agent) })
	case liveApply:
		a.part.applyLive(m.seq, m.ev)
		a.publish()
		m.done <- struct{}{}
	}
}

// record gathers run for the next append: at once when runBatch runs
// wait, else when the runLinger timer armed by the first of them fires.
func (a *runsActor) record(run *runRec) {
	a.pending = append(a.pending, run)
	if len(a.pending) >= runBatch {
		a.flush()
		return
	}
	if !a.armed {
		a.armed = true
		root, self := a.root, a.self
		time.AfterFunc(runLinger, func() { root.Send(self, flushRuns{}) })
	}
}

// flush appends the gathered runs, one record each, in one AppendAsync
// (one commit); their commit notice applies them.
func (a *runsActor) flush() {
	runs := a.pending
	if len(runs) == 0 {
		return
	}
	a.pending = nil
	recs := make([]wal.Record, len(runs))
	for i, r := range runs {
		recs[i] = runRecorded{r}.record()
	}
	a.recorded += uint64(len(runs))
	root, self := a.root, a.self
	a.log.AppendAsync(recs, func(last uint64, err error) {
		root.Send(self, runsCommitted{last: last, runs: runs, err: err})
	})
}

// committedRuns applies the runs of a committed append, numbered up to
// m.last in the order they were gathered, and publishes the traces once.
func (a *runsActor) committedRuns(m runsCommitted) {
	n := uint64(len(m.runs))
	a.committed += n
	defer a.unapplied.Add(-int64(n)) // after the publish: a reader that sees 0 sees the runs
	switch {
	case errors.Is(m.err, wal.ErrClosed):
		// Gathered when the node stopped without a clean stop's Flush
		// (an abort): lost, as they would be to kill -9. Nothing is
		// logged once the log is closed.
	case m.err != nil:
		for _, r := range m.runs {
			a.lg.Error("run record not logged", "run_id", r.ID, "err", m.err)
		}
	default:
		first := m.last - n + 1
		for i, r := range m.runs {
			a.part.add(first+uint64(i), r)
		}
		a.publish()
	}
	a.release()
}

// after runs done once every run recorded so far is applied (or failed
// to log): at once when none is outstanding, else after the gathered
// runs are appended and committed. Usage and instance queries wait so,
// and trace reads through syncRuns: a query sees every run recorded
// before it, whatever runLinger holds back.
func (a *runsActor) after(done func()) {
	if len(a.pending) == 0 && a.committed == a.recorded {
		done()
		return
	}
	a.flush()
	a.waiters = append(a.waiters, runsWaiter{upto: a.recorded, done: done})
}

func (a *runsActor) release() {
	a.waiters = slices.DeleteFunc(a.waiters, func(w runsWaiter) bool {
		if w.upto > a.committed {
			return false
		}
		w.done()
		return true
	})
}

// tracePage answers one trace by id (with its spans) or a page of the
// traces matching f, newest first, from traces (oldest first).
func tracePage(traces []*runRec, id string, f TraceFilter) TracePage {
	if id != "" {
		for i := len(traces) - 1; i >= 0; i-- {
			if t := traces[i]; t.ID == id {
				return TracePage{Traces: []Trace{t.view(true)}, Total: 1}
			}
		}
		return TracePage{}
	}
	limit := cmp.Or(f.Limit, 100)
	page := TracePage{Traces: []Trace{}}
	for i := len(traces) - 1; i >= 0; i-- {
		t := traces[i]
		if !f.matches(t) {
			continue
		}
		if page.Total >= f.Offset && len(page.Traces) < limit {
			page.Traces = append(page.Traces, t.view(f.Spans))
		}
		page.Total++
	}
	return page
}

// usage answers the usage rows that match q (unsorted).
func (a *runsActor) usage(m queryUsage) []usageRec {
	// Rows are hours: [From, To) takes the hours that start in it, and the
	// hour From falls in.
	from := m.q.From.UTC().Format(hourLayout)
	to := m.q.To.UTC().Add(time.Hour - time.Nanosecond).Format(hourLayout)
	var out []usageRec
	for _, u := range a.part.usage {
		if (!m.q.From.IsZero() && u.Hour < from) || (!m.q.To.IsZero() && u.Hour >= to) || !m.q.matches(u) {
			continue
		}
		out = append(out, *u)
	}
	return out
}

// RecordRun records a finished run: its trace, its token usage and its
// cost (each LLM span priced, see priceTrace). It returns at once; the
// record is durable within runLinger (10 ms) plus one WAL group commit,
// and visible to Traces and Usage after that.
func (g *Gateway) RecordRun(t Trace) {
	t.Spans = slices.Clone(t.Spans) // priced here: the caller's spans stay as they are
	g.priceTrace(&t)
	g.unapplied.Add(1)
	g.root.Send(g.runs, recordRun{run: newRunRec(t)})
}

// syncTraces waits, when runs are recorded and not yet applied, until
// they are (syncRuns): a trace read sees every run recorded before it.
// Without such runs it returns at once, and the read does not touch
// the runs actor.
func (g *Gateway) syncTraces(ctx context.Context) error {
	if g.unapplied.Load() == 0 {
		return nil
	}
	return g.syncRuns(ctx)
}

// syncRuns waits until every run recorded before it is applied.
func (g *Gateway) syncRuns(ctx context.Context) error {
	reply := make(chan struct{})
	g.root.Send(g.runs, syncRuns{reply: reply})
	_, err := await(ctx, reply)
	return err
}

// TracePage lists traces matching f, newest first: f.Offset of them
// skipped, at most f.Limit (0: 100) returned, with their Total.
//
// It reads the traces the runs actor published last, in the caller's
// goroutine: a trace query never waits behind recording or another query.
func (g *Gateway) TracePage(ctx context.Context, f TraceFilter) (TracePage, error) {
	if err := g.syncTraces(ctx); err != nil {
		return TracePage{}, err
	}
	if err := ctx.Err(); err != nil {
		return TracePage{}, err
	}
	return tracePage(*g.traces.Load(), "", f), nil
}

// Traces returns the newest traces matching f (with their spans), newest
// first.
func (g *Gateway) Traces(ctx context.Context, f TraceFilter) ([]Trace, error) {
	f.Spans = true
	p, err := g.TracePage(ctx, f)
	return p.Traces, err
}

// Trace returns one trace with its spans; ErrNotFound if it is unknown or
// aged out.
func (g *Gateway) Trace(ctx context.Context, id string) (Trace, error) {
	if err := g.syncTraces(ctx); err != nil {
		return Trace{}, err
	}
	if err := ctx.Err(); err != nil {
		return Trace{}, err
	}
	p := tracePage(*g.traces.Load(), id, TraceFilter{})
	if len(p.Traces) == 0 {
		return Trace{}, ErrNotFound
	}
	return p.Traces[0], nil
}

func (g *Gateway) usageRows(ctx context.Context, q UsageQuery) ([]usageRec, error) {
	reply := make(chan []usageRec, 1)
	g.root.Send(g.runs, queryUsage{q: q, reply: reply})
	return await(ctx, reply)
}
