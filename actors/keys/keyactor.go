package keys

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/google/uuid"

	"gatehouse/actors"
	"gatehouse/actors/clock"
	"gatehouse/actors/cluster"
	"gatehouse/actors/ratelimit"
	"gatehouse/wal"
)

// keyDeps are the shared, read-only dependencies of key actors.
type keyDeps struct {
	log   actors.EventLog
	clock clock.Clock
	root  *actor.RootContext
	lg    *slog.Logger
	grace int64 // seconds
	// courier carries WAL commit notices to shards and key actors.
	courier *courier
	// cl is cluster mode (nil: a single node).
	cl *clusterCtx
}

// inlineThroughput is how many messages an inline run of a shard or key
// actor processes before it yields the processor (runtime.Gosched).
const inlineThroughput = 300

// inlineProps builds the props of shards and key actors. They run on
// protoactor's synchronized dispatcher: the goroutine that sends a message
// to an idle one processes its mailbox itself, then goes on; a message to
// one that another goroutine is running is only queued for that goroutine.
// So an authorization costs no goroutine hand-off when uncontended: the
// HTTP handler runs the shard, the shard runs the key actor, and the
// answer is in the reply channel when Send returns. Each actor still
// processes one message at a time from its own mailbox.
//
// The rule that makes it safe: such actors never block (the WAL is only
// appended to asynchronously from them), and goroutines that must not run
// actor code (the WAL writer) post through the courier. Their mailbox is
// inlineMailbox (mailbox.go): no allocation per run. keep, if not nil,
// receives the actor's mailbox when it is spawned, for direct delivery
// (inlineMailbox.deliver).
func (d *keyDeps) inlineProps(p actor.Producer, keep **inlineMailbox) *actor.Props {
	mb := newInlineMailbox
	if keep != nil {
		mb = func() actor.Mailbox {
			m := newInlineMailbox()
			*keep = m.(*inlineMailbox)
			return m
		}
	}
	return actor.PropsFromProducer(p, actor.WithDispatcher(actor.NewSynchronizedDispatcher(inlineThroughput)),
		actor.WithMailbox(mb))
}

// keyProps is inlineProps for a key actor, whose mailbox is mb, a field
// of its liveSlot: readied in place when the actor spawns.
func (d *keyDeps) keyProps(p actor.Producer, mb *inlineMailbox) *actor.Props {
	return actor.PropsFromProducer(p, actor.WithDispatcher(actor.NewSynchronizedDispatcher(inlineThroughput)),
		actor.WithMailbox(func() actor.Mailbox {
			mb.init()
			return mb
		}))
}

// keyActor owns one live key: its record, limiter window and usage. Admitted
// requests are counted at once and logged in batches: pending holds the
// deltas not yet handed to the WAL, inflight those handed over and not yet
// committed. state minus pending minus inflight is the durable image.
//
// It runs inline on its shard's goroutine (inlineProps), so it never
// waits for the disk: a command's event is appended asynchronously and
// applied, then answered, when its commit notice (cmdLogged) arrives.
// Meanwhile requests are still authorized against the state before the
// command (which nobody has been told about yet), reads are answered, and
// further commands wait in stash, in order.
//
// A key actor is a field of its liveSlot (shard.go), and what an
// authorization reads comes first, the limiter window among it: the
// state's window is this one while the actor is live (see start and
// passivate), so admitting a request does not chase a pointer to a
// window object of its own.
type keyActor struct {
	state    *keyState
	deps     *keyDeps
	kc       *keyCluster // cluster mode only (keyactorcluster.go)
	gone     bool
	win      ratelimit.Window // the state's window while live (state.win == &win)
	pending  []secCount
	counted  int64 // the second of the last count: pending's newest, if any
	inflight []secCount
	spare    []secCount        // a committed inflight's array, for the next pending
	waiters  []*sync.WaitGroup // flushNow callers waiting for inflight to commit
	cmd      *keyCmd           // the command whose event is being logged
	cmdEv    keyEvent          // its event
	stash    []*keyCmd         // commands that arrived meanwhile
}

// start readies a in place to own st, as the actor's producer does at
// spawn and again after a restart. The state's window moves into a.win
// (on a restart it is a.win already, and is kept as it was).
func (a *keyActor) start(deps *keyDeps, st *keyState, kc *keyCluster) {
	var w ratelimit.Window
	hasWin := st.win != nil
	if hasWin {
		w = *st.win
	}
	*a = keyActor{deps: deps, state: st, kc: kc, win: w}
	if hasWin {
		st.win = &a.win
	}
}

// window returns the state's limiter window, which on first use is a.win.
func (a *keyActor) window() *ratelimit.Window {
	if a.state.win == nil {
		a.state.win = &a.win
	}
	return a.state.win
}

// releaseWindow gives the state a window of its own again, before the
// state leaves the actor (passivation): a.win dies with the actor.
func (a *keyActor) releaseWindow(st *keyState) {
	if st.win == &a.win {
		w := new(ratelimit.Window)
		*w = a.win
		st.win = w
		a.win = ratelimit.Window{}
	}
}

// cmdLogged is the commit (or failure) of the event of keyActor.cmd.
type cmdLogged struct {
	seq uint64
	err error
}

// Receive is the actor's mailbox entry point: one method per message.
func (a *keyActor) Receive(ctx actor.Context) {
	if a.state == nil {
		// Passivated: the shard owns the state now and re-routes.
		switch m := ctx.Message().(type) {
		case *authorize, *keyCmd, *foreignKey:
			ctx.Forward(ctx.Parent())
		case settleKey:
			m.out <- cluster.Put{}
		}
		return
	}
	switch m := ctx.Message().(type) {
	case *authorize:
		if r, ok := a.authorize(ctx, m); ok {
			m.reply <- r
		}
	case takeOver:
		a.takenOver(ctx, m)
	case reserved:
		a.reservedDone(ctx, m)
	case settleKey:
		a.settle(ctx, m)
	case *foreignKey:
		a.foreign(ctx, m)
	case *keyCmd:
		if a.cmd != nil && m.op.mutates() {
			a.stash = append(a.stash, m)
			return
		}
		a.run(ctx, m)
	case cmdLogged:
		a.committed(ctx, m)
	case flushKey:
		a.flush(ctx)
	case flushNow:
		a.flushNow(ctx, m)
	case usageLogged:
		a.logged(ctx, m)
	case captureKey:
		if a.gone {
			m.out <- nil
			return
		}
		var w enc
		encodeKeyState(&w, a.state.durableCopy(a.pending, a.inflight))
		m.out <- w.b
	case passivate:
		a.passivate(ctx)
	}
}

// declineDirect is set by tests only (export_test.go): a key actor
// declines the direct deliveries it picks, as a busy one would, so the
// mailbox path runs beside the direct one.
var declineDirect atomic.Pointer[func(id uuid.UUID, msg any) bool]

// receiveDirect takes a message straight from its shard
// (inlineMailbox.deliver), as Receive would: an authorization, or a flush
// round's flushDirect and loggedDirect. It declines everything else, a
// passivated actor's messages and, in cluster mode, authorizations (they
// may wait for a takeover or a reservation, which needs the actor's
// context).
func (a *keyActor) receiveDirect(msg any) bool {
	if a.state == nil {
		return false
	}
	if f := declineDirect.Load(); f != nil && (*f)(a.state.rec.id, msg) {
		return false
	}
	switch m := msg.(type) {
	case *authorize:
		if a.kc != nil {
			return false
		}
		r, _ := a.authorize(nil, m) // ctx is used in cluster mode only
		m.reply <- r
		return true
	case *flushDirect:
		m.part = a.flushPart()
		return true
	case *loggedDirect:
		return a.loggedDirect(m.m)
	}
	return false
}

// authorize decides m. ok is false only in cluster mode, when the request
// waits for a takeover or a reservation and is answered later.
func (a *keyActor) authorize(ctx actor.Context, m *authorize) (res AuthResult, ok bool) {
	if a.gone {
		return AuthResult{Err: ErrKeyInvalid}, true
	}
	now := a.deps.clock.Now().Unix()
	s := a.state
	res = AuthResult{KeyID: s.rec.id, UserID: s.rec.owner, IsActive: s.active()}
	if m.forwarded {
		// Another node checked the secret; the key's status is checked
		// again here, where its changes are applied first.
		res.Err = s.checkStatus(now)
	} else {
		res.Err = s.check(m.hash, now)
	}
	if res.Err != nil {
		if res.Err == ErrKeyInvalid {
			// Not this key's secret (the directory matched a prefix
			// only, see dirTable): nothing about this key is told.
			return AuthResult{Err: ErrKeyInvalid}, true
		}
		return res, true
	}
	if !m.consume {
		if kc := a.kc; kc != nil && kc.ca != nil {
			res.Limit = kc.ca.a.Win.Peek(now, s.rec.rateLimit)
		} else {
			res.Limit = a.window().Peek(now, s.rec.rateLimit)
		}
		return res, true
	}
	if a.kc != nil {
		return a.clusterAuthorize(ctx, m, res, now)
	}
	res.Limit = a.window().Allow(now, s.rec.rateLimit)
	if !res.Limit.Allowed {
		res.Err = ErrRateLimited
		return res, true
	}
	a.count(now)
	return res, true
}

// count records one admitted request at second now: usage at once, the
// delta for the next flush.
//
// pending's newest entry is read only when the last count was in this
// second too: for a key used once a second or less it is a cache miss,
// and the new second's entry is appended without it.
func (a *keyActor) count(now int64) {
	a.state.use.add(now, 1)
	if n := len(a.pending); n > 0 && a.counted == now && a.pending[n-1].sec == now {
		a.pending[n-1].n++
	} else {
		if a.pending == nil {
			a.pending, a.spare = a.spare, nil
		}
		a.pending = append(a.pending, secCount{sec: now, n: 1})
	}
	a.counted = now
}

// flush hands pending deltas to the shard, which logs the usage of all
// its keys in one record (keysUsed) and answers each with usageLogged.
// It always answers, so that the shard knows when its round is complete.
// A key whose previous batch is still in flight keeps its deltas for the
// next tick and asks the shard to keep it dirty (the tick cleared it).
func (a *keyActor) flush(ctx actor.Context) {
	p := a.flushPart()
	p.pid = ctx.Self()
	ctx.Send(ctx.Parent(), p)
}

// flushPart is flush's answer, its pid unset: the pending deltas, now
// inflight.
func (a *keyActor) flushPart() usagePart {
	switch {
	case len(a.pending) == 0 || a.gone:
		return usagePart{}
	case len(a.inflight) > 0:
		return usagePart{ev: keyUsed{id: a.state.rec.id}, again: true}
	default:
		a.inflight, a.pending = a.pending, nil
		return usagePart{ev: keyUsed{id: a.state.rec.id, pairs: a.inflight}}
	}
}

// loggedDirect is logged's common case, also taken straight from the
// shard: a commit, nothing left to append for flushNow waiters. It
// declines (false) what needs the actor's context: a failure (the key
// asks to stay dirty) or waiters with usage pending (their own append).
func (a *keyActor) loggedDirect(m usageLogged) bool {
	if m.err != nil || (len(a.pending) > 0 && len(a.waiters) > 0 && !a.gone) {
		return false
	}
	a.state.usageSeq = max(a.state.usageSeq, m.seq)
	// The batch was encoded when it was appended: nothing else holds
	// inflight's array.
	a.spare, a.inflight = a.inflight[:0], nil
	a.release()
	return true
}

// logged takes the commit (or failure) of the inflight batch. Live state
// already counts these requests: only the watermark moves. Deltas counted
// meanwhile wait for the next tick (their requests marked the key dirty,
// or flush asked for it), unless flushNow callers wait for them.
func (a *keyActor) logged(ctx actor.Context, m usageLogged) {
	if a.loggedDirect(m) {
		return
	}
	if m.err != nil {
		// Keep the deltas: they go out again with the next tick. A failed
		// log said so once already; this would repeat it every second.
		if !errors.Is(m.err, wal.ErrFailed) {
			a.deps.lg.Warn("usage flush failed", "key_id", a.state.rec.id, "err", m.err)
		}
		a.pending = append(a.inflight, a.pending...)
		a.inflight = nil
		ctx.Send(ctx.Parent(), keyDirty{id: a.state.rec.id})
		a.release()
		return
	}
	a.state.usageSeq = max(a.state.usageSeq, m.seq)
	a.inflight = nil
	a.appendPending(ctx) // the waiters are released on its commit
}

// appendPending logs the pending deltas as this key's own record, outside
// the shard's batches; the commit comes back as usageLogged.
func (a *keyActor) appendPending(ctx actor.Context) {
	a.inflight, a.pending = a.pending, nil
	ev := keyUsed{id: a.state.rec.id, pairs: a.inflight}
	self, c := ctx.Self(), a.deps.courier
	a.deps.log.AppendAsync([]wal.Record{ev.record()}, func(seq uint64, err error) {
		c.post(self, usageLogged{seq: seq, err: err})
	})
}

// flushNow logs pending usage and reports when it is durable: the waiter
// is released when the batch commits (logged), or at once if nothing is
// pending.
func (a *keyActor) flushNow(ctx actor.Context, m flushNow) {
	a.waiters = append(a.waiters, m.wg)
	if len(a.inflight) > 0 {
		return // released when the inflight batch commits
	}
	if len(a.pending) > 0 && !a.gone {
		a.appendPending(ctx)
		return
	}
	a.release()
}

func (a *keyActor) release() {
	if len(a.inflight) > 0 {
		return
	}
	for _, wg := range a.waiters {
		wg.Done()
	}
	a.waiters = nil
}

// passivate hands the state back to the shard unless deltas are unlogged
// or a command is being logged.
func (a *keyActor) passivate(ctx actor.Context) {
	if len(a.pending) > 0 || len(a.inflight) > 0 || a.gone || a.cmd != nil ||
		(a.kc != nil && (len(a.kc.waiting) > 0 || a.kc.reserving > 0)) {
		ctx.Send(ctx.Parent(), passivated{id: a.state.rec.id})
		return
	}
	st := a.state
	a.state = nil
	a.releaseWindow(st)
	var ca *clusterAllow
	if a.kc != nil {
		ca = a.kc.ca
	}
	ctx.Send(ctx.Parent(), passivated{id: st.rec.id, state: st, ca: ca})
}

// run answers m now, or starts logging its event (answered in committed).
func (a *keyActor) run(ctx actor.Context, m *keyCmd) {
	ev, r := a.command(m)
	if ev == nil {
		m.reply <- r
		return
	}
	a.cmd, a.cmdEv = m, ev
	self, c := ctx.Self(), a.deps.courier
	a.deps.log.AppendAsync([]wal.Record{ev.record()}, func(seq uint64, err error) {
		c.post(self, cmdLogged{seq: seq, err: err})
	})
}

// command validates a control-plane command against the current state:
// it returns the event to log, or (nil and) the answer.
func (a *keyActor) command(m *keyCmd) (keyEvent, keyReply) {
	if a.gone {
		return nil, keyReply{err: ErrKeyNotFound}
	}
	now := a.deps.clock.Now()
	s := a.state
	switch m.op {
	case opGet:
		return nil, keyReply{info: s.info()}
	case opUsage:
		return nil, keyReply{info: s.info(), usage: s.usageView(now, m.days)}
	case opRotate:
		if s.rec.revoked {
			return nil, keyReply{err: ErrKeyInactive}
		}
		ev := m.rot
		ev.id, ev.at, ev.graceEnds = s.rec.id, now.Unix(), now.Unix()+a.deps.grace
		return ev, keyReply{}
	case opRevoke:
		if s.rec.revoked {
			return nil, keyReply{info: s.info()}
		}
		return keyRevoked{id: s.rec.id, at: now.Unix()}, keyReply{}
	case opUpdate:
		return a.update(m.patch), keyReply{}
	case opDelete:
		return keyDeleted{id: s.rec.id}, keyReply{}
	}
	return nil, keyReply{err: fmt.Errorf("key command %d: %w", m.op, actors.ErrInvalidArgument)}
}

func (a *keyActor) update(p KeyPatch) keyEvent {
	r := a.state.rec
	ev := keyUpdated{id: r.id, name: r.name, rateLimit: r.rateLimit, expiresAt: r.expiresAt}
	if p.Name != nil {
		ev.name = *p.Name
	}
	if p.RateLimit != nil {
		ev.rateLimit = *p.RateLimit
	}
	if p.ExpiresAt != nil {
		ev.expiresAt = 0
		if !p.ExpiresAt.IsZero() {
			ev.expiresAt = p.ExpiresAt.Unix()
		}
	}
	return ev
}

// committed applies the logged event of a.cmd through applyKey and answers
// it (the reply carries the directory effects for Service.publish to deliver), then
// runs the stashed commands until one has to be logged in turn.
func (a *keyActor) committed(ctx actor.Context, m cmdLogged) {
	cmd, ev := a.cmd, a.cmdEv
	a.cmd, a.cmdEv = nil, nil
	if cmd == nil {
		return
	}
	cmd.reply <- a.apply(ctx, m, ev)
	for a.cmd == nil && len(a.stash) > 0 {
		next := a.stash[0]
		a.stash[0] = nil
		a.stash = a.stash[1:]
		a.run(ctx, next)
	}
	if len(a.stash) == 0 {
		a.stash = nil
	}
}

func (a *keyActor) apply(ctx actor.Context, m cmdLogged, ev keyEvent) keyReply {
	if m.err != nil {
		return keyReply{err: fmt.Errorf("log key event: %w", m.err)}
	}
	info := a.state.info()
	st, fx, err := applyKey(a.state, m.seq, ev)
	if err != nil {
		// Cannot happen: the command was validated against this state, and
		// only commands change the record (they wait in stash meanwhile).
		return keyReply{err: errors.Join(errors.New("actors: logged event did not apply"), err)}
	}
	if st != nil {
		return keyReply{info: st.info(), fx: fx}
	}
	// Deleted. Usage not yet logged dies with the key: nothing can read it
	// any more. The gone actor keeps the last state for its answers.
	a.gone = true
	a.pending, a.inflight = nil, nil
	a.release()
	ctx.Send(ctx.Parent(), keyGone{id: fx.id})
	return keyReply{info: info, fx: fx}
}
