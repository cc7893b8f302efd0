package gateway

import (
	"cmp"
	"context"
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
type runsActor struct {
	log  actors.EventLog
	lg   *slog.Logger
	root *actor.RootContext
	self *actor.PID
	part *runState

	recorded, committed uint64 // runs sent to the WAL, and answered by it
	waiters             []runsWaiter
	// view receives the traces after each applied run: trace reads scan
	// it in their caller's goroutine (see runState.dropOldest).
	view *atomic.Pointer[[]*runRec]
}

// publish makes the current traces the readers' view.
func (a *runsActor) publish() {
	ts := a.part.traces
	a.view.Store(&ts)
}

type recordRun struct{ run *runRec }

type runCommitted struct {
	seq uint64
	ev  runRecorded
	err error
}

// syncRuns is answered once every run recorded before it is applied (or
// failed to log): tests wait on it instead of polling.
type syncRuns struct{ reply chan struct{} }

type runsWaiter struct {
	upto  uint64
	reply chan struct{}
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
	case runCommitted:
		a.committedRun(m)
	case syncRuns:
		a.waiters = append(a.waiters, runsWaiter{upto: a.recorded, reply: m.reply})
		a.release()
	case queryUsage:
		m.reply <- a.usage(m)
	case captureRuns:
		m.reply <- a.part.image()
	case queryInstances:
		m.reply <- a.part.instancesOf(m.agent)
	case liveApply:
		a.part.applyLive(m.seq, m.ev)
		a.publish()
		m.done <- struct{}{}
	}
}

func (a *runsActor) record(run *runRec) {
	root, self := a.root, a.self
	ev := runRecorded{run}
	a.recorded++
	a.log.AppendAsync([]wal.Record{ev.record()}, func(seq uint64, err error) {
		root.Send(self, runCommitted{seq: seq, ev: ev, err: err})
	})
}

func (a *runsActor) committedRun(m runCommitted) {
	a.committed++
	if m.err != nil {
		a.lg.Error("run record not logged", "run_id", m.ev.run.ID, "err", m.err)
	} else {
		a.part.add(m.seq, m.ev.run)
		a.publish()
	}
	a.release()
}

func (a *runsActor) release() {
	a.waiters = slices.DeleteFunc(a.waiters, func(w runsWaiter) bool {
		if w.upto > a.committed {
			return false
		}
		close(w.reply)
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
// cost (each LLM span priced, see priceTrace). It returns at once; the record is durable within one WAL group commit
// and visible to Traces and Usage after that.
func (g *Gateway) RecordRun(t Trace) {
	t.Spans = slices.Clone(t.Spans) // priced here: the caller's spans stay as they are
	g.priceTrace(&t)
	g.root.Send(g.runs, recordRun{run: newRunRec(t)})
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
