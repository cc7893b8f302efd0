package gateway

import (
	"context"
	"log/slog"
	"slices"
	"strings"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/google/uuid"

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

// TraceFilter selects traces; zero fields match everything.
type TraceFilter struct {
	AgentID uuid.UUID
	UserID  string
	Status  string
	Day     string // 2006-01-02, UTC
	Limit   int    // 0: 100
}

type queryTraces struct {
	f     TraceFilter
	id    string
	reply chan []Trace
}

type queryUsage struct {
	agent uuid.UUID
	user  string
	reply chan []UsageRow
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
	case queryTraces:
		m.reply <- a.traces(m)
	case queryUsage:
		m.reply <- a.usage(m)
	case captureRuns:
		m.reply <- a.part.image()
	case queryInstances:
		m.reply <- a.part.instancesOf(m.agent)
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
		a.part.apply(m.seq, m.ev)
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

func (a *runsActor) traces(m queryTraces) []Trace {
	limit := m.f.Limit
	if limit <= 0 {
		limit = 100
	}
	var out []Trace
	for i := len(a.part.traces) - 1; i >= 0 && len(out) < limit; i-- {
		t := a.part.traces[i]
		switch {
		case m.id != "" && t.ID != m.id,
			m.f.AgentID != uuid.Nil && t.AgentID != m.f.AgentID,
			m.f.UserID != "" && t.UserID != m.f.UserID,
			m.f.Status != "" && t.Status != m.f.Status,
			m.f.Day != "" && !strings.HasPrefix(t.StartedAt.UTC().Format("2006-01-02"), m.f.Day):
			continue
		}
		out = append(out, t.view())
	}
	return out
}

func (a *runsActor) usage(m queryUsage) []UsageRow {
	var rows []usageRec
	for _, u := range a.part.usage {
		if (m.agent == uuid.Nil || u.AgentID == m.agent) && (m.user == "" || u.UserID == m.user) {
			rows = append(rows, *u)
		}
	}
	slices.SortFunc(rows, cmpUsage)
	out := make([]UsageRow, len(rows))
	for i := range rows {
		out[i] = rows[i].view()
	}
	return out
}

// RecordRun records a finished run: its trace and its token usage. It
// returns at once; the record is durable within one WAL group commit and
// visible to Traces and Usage after that.
func (g *Gateway) RecordRun(t Trace) {
	g.root.Send(g.runs, recordRun{run: newRunRec(t)})
}

// syncRuns waits until every run recorded before it is applied.
func (g *Gateway) syncRuns(ctx context.Context) error {
	reply := make(chan struct{})
	g.root.Send(g.runs, syncRuns{reply: reply})
	_, err := await(ctx, reply)
	return err
}

// Traces returns the newest traces matching f, newest first.
func (g *Gateway) Traces(ctx context.Context, f TraceFilter) ([]Trace, error) {
	reply := make(chan []Trace, 1)
	g.root.Send(g.runs, queryTraces{f: f, reply: reply})
	return await(ctx, reply)
}

// Trace returns one trace; ErrNotFound if it is unknown or aged out.
func (g *Gateway) Trace(ctx context.Context, id string) (Trace, error) {
	reply := make(chan []Trace, 1)
	g.root.Send(g.runs, queryTraces{id: id, f: TraceFilter{Limit: 1}, reply: reply})
	ts, err := await(ctx, reply)
	if err != nil {
		return Trace{}, err
	}
	if len(ts) == 0 {
		return Trace{}, ErrNotFound
	}
	return ts[0], nil
}

// Usage returns usage rows by day, for one agent and/or user (zero: all).
func (g *Gateway) Usage(ctx context.Context, agent uuid.UUID, user string) ([]UsageRow, error) {
	reply := make(chan []UsageRow, 1)
	g.root.Send(g.runs, queryUsage{agent: agent, user: user, reply: reply})
	return await(ctx, reply)
}
