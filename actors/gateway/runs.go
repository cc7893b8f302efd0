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

// runsActor owns the run traces and the usage per agent/user/day. A run is
// appended asynchronously (the reply to the client never waits for it);
// the commit notice applies it, so a snapshot sees exactly the runs whose
// records precede its barrier, and the watermark makes replay exact.
type runsActor struct {
	log  actors.EventLog
	lg   *slog.Logger
	root *actor.RootContext
	self *actor.PID
	st   runState
}

type recordRun struct{ t Trace }

type runCommitted struct {
	seq uint64
	t   Trace
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

type runsImage struct {
	seq    uint64
	traces []Trace
	usage  []UsageRow
}

// Receive is the runs actor's mailbox entry point.
func (a *runsActor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case recordRun:
		a.record(m.t)
	case runCommitted:
		a.st.apply(m.seq, m.t)
	case queryTraces:
		m.reply <- a.traces(m)
	case queryUsage:
		m.reply <- a.usage(m)
	case captureRuns:
		m.reply <- runsImage{seq: a.st.seq, traces: slices.Clone(a.st.traces), usage: a.usage(queryUsage{})}
	}
}

func (a *runsActor) record(t Trace) {
	root, self, lg := a.root, a.self, a.lg
	a.log.AppendAsync([]wal.Record{jsonRecord(recRunRecorded, t)}, func(seq uint64, err error) {
		if err != nil {
			lg.Error("run record not logged", "run_id", t.ID, "err", err)
			return
		}
		root.Send(self, runCommitted{seq: seq, t: t})
	})
}

func (a *runsActor) traces(m queryTraces) []Trace {
	limit := m.f.Limit
	if limit <= 0 {
		limit = 100
	}
	var out []Trace
	for i := len(a.st.traces) - 1; i >= 0 && len(out) < limit; i-- {
		t := a.st.traces[i]
		switch {
		case m.id != "" && t.ID != m.id,
			m.f.AgentID != uuid.Nil && t.AgentID != m.f.AgentID,
			m.f.UserID != "" && t.UserID != m.f.UserID,
			m.f.Status != "" && t.Status != m.f.Status,
			m.f.Day != "" && !strings.HasPrefix(t.StartedAt.UTC().Format("2006-01-02"), m.f.Day):
			continue
		}
		out = append(out, t)
	}
	return out
}

func (a *runsActor) usage(m queryUsage) []UsageRow {
	out := make([]UsageRow, 0, len(a.st.usage))
	for _, u := range a.st.usage {
		if (m.agent == uuid.Nil || u.AgentID == m.agent) && (m.user == "" || u.UserID == m.user) {
			out = append(out, *u)
		}
	}
	slices.SortFunc(out, func(x, y UsageRow) int {
		if c := strings.Compare(x.Day, y.Day); c != 0 {
			return c
		}
		if c := strings.Compare(x.AgentID.String(), y.AgentID.String()); c != 0 {
			return c
		}
		return strings.Compare(x.UserID, y.UserID)
	})
	return out
}

// RecordRun records a finished run: its trace and its token usage. It
// returns at once; the record is durable within one WAL group commit and
// visible to Traces and Usage after that.
func (g *Gateway) RecordRun(t Trace) {
	g.root.Send(g.runs, recordRun{t: t})
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
