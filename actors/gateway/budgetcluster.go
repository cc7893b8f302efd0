package gateway

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"gatehouse/actors"
	"gatehouse/wal"
)

// Budgets in cluster mode (docs/budgets.md, "Cluster mode"): holds taken
// under the budget's lock and decided in log order on every node, the
// sweep of the holds of nodes that left, and what the log's follower
// tells the allowances.

// BudgetLocker serializes the holds of a budget across a cluster's nodes:
// Lock waits until this node may take a hold on budget id, on a ledger
// that holds every hold taken before it (cmd wires the cluster's entity
// locks; nil on a single node, where the ledger's shard serializes).
type BudgetLocker interface {
	Lock(ctx context.Context, name string) (unlock func(), err error)
}

// SetBudgetLocker makes the nodes of a cluster take turns at a budget's
// holds; call it before the first call.
func (g *Gateway) SetBudgetLocker(l BudgetLocker) { g.budgetLock = l }

// maxHoldTries bounds the holds a call decides in cluster mode before it
// gives up (each void because another node's came first).
const maxHoldTries = 8

// grantOut is a shard's answer to a call that found no allowance: a draw,
// a refusal or an error; in cluster mode, a hold appended and waiting for
// the log to apply it.
type grantOut struct {
	d    draw
	res  reserveResult
	err  error
	wait chan holdOutcome
}

// holdOutcome is a cluster hold as the log applied it: void, or granted
// with the call's draw from it.
type holdOutcome struct {
	d    draw
	res  reserveResult
	void bool
}

// awaitHold waits for the log to apply a cluster hold; a caller that
// leaves gives the draw back when it comes.
func awaitHold(ctx context.Context, wait chan holdOutcome) (holdOutcome, error) {
	h, err := await(ctx, wait)
	if err != nil {
		go func() {
			if h := <-wait; h.d.g != nil {
				h.d.end(0, 0, false)
			}
		}()
		return holdOutcome{}, fmt.Errorf("wait for a budget hold: %w", err)
	}
	return h, nil
}

// holdSweep tracks the sweep of holds whose node left the cluster.
type holdSweep struct {
	running atomic.Bool
	last    atomic.Int64         // unix nanoseconds of the last sweep
	gone    map[string]time.Time // node → first seen gone (the sweep's goroutine only)
}

// sweepOrphanedHolds settles, at their full amount, the holds of nodes
// that have been out of the cluster's members for OrphanedSummonAfter:
// their calls ended with them (a node that comes back sooner settles its
// own at its start). A hold is settled once, whoever writes first: a
// settlement of a hold already ended changes nothing. Tick must not
// block: the sweep runs on its own goroutine.
func (g *Gateway) sweepOrphanedHolds(now time.Time) {
	sw := &g.holds
	g.sweepMembers(now, &sw.running, &sw.last, func(ctx context.Context, alive map[string]bool) {
		holders, err := eachTenant(ctx, g, nil, func(t *tenantShard) (map[string]bool, error) {
			out := map[string]bool{}
			for _, l := range t.part.ledgers {
				for _, h := range l.Holds {
					if h.Node != "" && !alive[h.Node] {
						out[h.Node] = true
					}
				}
			}
			return out, nil
		})
		if err != nil {
			g.lg.Warn("sweep budget holds of nodes that left", "err", err)
			return
		}
		settle := sw.due(holders, now)
		if len(settle) == 0 {
			return
		}
		_, err = eachTenant(ctx, g, nil, func(t *tenantShard) (struct{}, error) {
			return struct{}{}, t.settleInterrupted(func(node string) bool { return settle[node] })
		})
		if err != nil {
			g.lg.Warn("settle budget holds of nodes that left", "err", err)
			return
		}
		g.lg.Info("settled the budget holds of nodes that left the cluster", "nodes", len(settle))
	})
}

// due notes when each node holding a hold was first seen gone, and
// returns those gone for OrphanedSummonAfter as of now.
func (sw *holdSweep) due(holders []map[string]bool, now time.Time) map[string]bool {
	missing := map[string]bool{}
	for _, hs := range holders {
		for n := range hs {
			missing[n] = true
		}
	}
	if sw.gone == nil {
		sw.gone = map[string]time.Time{}
	}
	for n := range sw.gone {
		if !missing[n] {
			delete(sw.gone, n)
		}
	}
	settle := map[string]bool{}
	for n := range missing {
		if since, ok := sw.gone[n]; !ok {
			sw.gone[n] = now
		} else if now.Sub(since) >= OrphanedSummonAfter {
			settle[n] = true
		}
	}
	return settle
}

// liveBudget follows a budget record the log applied: this node's own
// cluster hold (its waiting call learns whether it was granted), or
// another node's settlement that ended one of this node's holds (the node was taken for gone and its
// holds settled at full) ends it here too, so no call spends from it.
func (t *tenantShard) liveBudget(ev event) {
	if e, ok := ev.(budgetReserved); ok && e.Node == t.node {
		t.ownHoldApplied(e)
		return
	}
	e, ok := ev.(budgetSettled)
	if !ok || t.allow[e.Budget] == nil {
		return
	}
	if l := t.part.ledgers[e.Budget]; l == nil || l.hold(e.Hold) < 0 {
		t.allow[e.Budget].drop(e.Hold)
	}
}

// A cluster hold is decided in log order, the same on every node: record
// 74 names the last hold its ledger held when it was decided (After), and
// a hold whose ledger has taken another since is void (ledgerRec.reserve).
// The budget's lock makes that rare (the next holder waits for the
// previous one's writes); the rule makes it exact when a lock holder
// pauses past its lease and writes late, as a fenced write would. So the
// writer does not apply its hold when the append returns, as it does its
// other records: the log's follower applies it, on this node too
// (AppliesOwn), and the call waits for that.

var _ actors.OwnApplier = (*Gateway)(nil)

// AppliesOwn: in cluster mode the budget records (holds and
// settlements) are applied in log order by every node, their writer
// included, so every node's ledger is the same function of the log.
func (g *Gateway) AppliesOwn(t wal.Type) bool {
	return (t == recBudgetReserved || t == recBudgetSettled) && g.cfg.NodeID != ""
}

// appendBudget appends budget records (75: settlements) of this shard:
// on a single node applied at once (commitAll); in cluster mode applied
// by the log's follower, in log order, on this node as on the others.
func (t *tenantShard) appendBudget(evs ...event) error {
	if t.node == "" {
		return commitAll(t.log, t.part, evs...)
	}
	recs := make([]wal.Record, len(evs))
	for i, ev := range evs {
		recs[i] = ev.record()
	}
	_, err := t.log.Append(recs...)
	return err
}

// pendingHold is a call waiting for its cluster hold to be applied.
type pendingHold struct {
	b            *budgetRec
	nano, tokens int64
	done         chan holdOutcome
}

// appendClusterHold appends hold ev (decided on the ledger as this shard
// holds it) after settled, the settlements ss of a's holds, and answers
// with the channel on which its outcome comes once the log applies it
// (liveBudget).
func (t *tenantShard) appendClusterHold(b *budgetRec, a *allowance, ev budgetReserved, nano, tokens int64, ss []settlement, settled []event) grantOut {
	if l := t.part.ledgers[b.ID]; l != nil {
		ev.After = l.LastHold
	}
	ph := &pendingHold{b: b, nano: nano, tokens: tokens, done: make(chan holdOutcome, 1)}
	if t.pending == nil {
		t.pending = map[uuid.UUID]*pendingHold{}
	}
	t.pending[ev.Hold] = ph
	recs := make([]wal.Record, 0, len(settled)+1)
	for _, s := range settled {
		recs = append(recs, s.record())
	}
	_, err := t.log.Append(append(recs, ev.record())...)
	a.settled(ss, err == nil)
	if err != nil {
		delete(t.pending, ev.Hold)
		return grantOut{err: fmt.Errorf("log budget reservation: %w", err)}
	}
	return grantOut{wait: ph.done}
}

// ownHoldApplied answers the call waiting for hold e, which the log has
// just applied: granted (the ledger holds it: the call's draw is taken
// from it) or void.
func (t *tenantShard) ownHoldApplied(e budgetReserved) {
	ph := t.pending[e.Hold]
	if ph == nil {
		return // a hold of an earlier life of this node: settled at its start
	}
	delete(t.pending, e.Hold)
	l := t.part.ledgers[e.Budget]
	if l == nil || l.hold(e.Hold) < 0 {
		ph.done <- holdOutcome{void: true}
		return
	}
	gr := &grant{id: e.Hold, period: e.Period, at: e.At, perSec: ph.b.MaxTPM > 0, nano: e.Nano, tokens: e.Tokens,
		inN: ph.nano, inT: ph.tokens, drawn: true}
	a := t.allow[e.Budget] // a flush may have dropped the one the hold was decided for, if it was empty
	if a == nil {
		a, _ = t.allowance(t.gw, ph.b)
	}
	a.mu.Lock()
	a.grants = append(a.grants, gr)
	a.mu.Unlock()
	t.publishSeen(a, e.Budget, e.Period, e.At)
	d := draw{b: ph.b, a: a, g: gr, nano: ph.nano, tokens: ph.tokens}
	ph.done <- holdOutcome{d: d, res: t.gw.remainingAfter(ph.b, a, e.Period)}
}
