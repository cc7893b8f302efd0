package keys

import (
	"fmt"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/google/uuid"

	"gatehouse/actors"
	"gatehouse/wal"
)

// slot is a shard's handle on one key: its state, which the shard owns
// while the key is passive and its key actor while live is set. A million
// passive keys are a million slots, so everything only a live key needs
// sits behind live.
//
// live comes first and the state's hot fields next (keyState), so that
// routing an authorization to a key not used lately reads the slot's
// first two cache lines, not five.
type slot struct {
	live *liveSlot // nil while passive
	st   keyState
}

// liveSlot is what a shard keeps of a live key besides its state: one
// object holding the key actor's mailbox and the actor itself, so that
// an authorization's path from the slot to the window is one pointer
// (issue 35: each object was a cache miss for a key not used lately).
// mb's hot words are its last, next to the flags route reads, then the
// actor's hot fields (keyActor).
type liveSlot struct {
	// The key actor's mailbox and the actor itself (its producer readies
	// it in place, again after a restart), for direct delivery
	// (inlineMailbox.deliver): ka is used only while holding the actor's
	// turn.
	mb          inlineMailbox
	passivating bool
	dirty       bool
	lastSeen    int64
	ka          keyActor
	owner       uuid.UUID // st.rec.owner, which the shard must not read while live
	pid         *actor.PID
	held        *held // only while passivating
}

// receiveDirect passes a directly delivered message to the key actor, in
// the actor's turn (a restart readies ka again).
func (l *liveSlot) receiveDirect(msg any) bool { return l.ka.receiveDirect(msg) }

// held is what waits for a passivation to finish.
type held struct {
	msgs     []any         // messages for the key
	captures []chan []byte // snapshot captures
}

// shard owns a fixed slice of the key space twice over: the keys whose id
// maps here (their slots and key actors), and the directory entries of the
// secret hashes that map here (hash → key id).
type shard struct {
	idx, n    int
	deps      *keyDeps
	idleAfter int64
	peers     []*actor.PID
	keys      *keyTable // id → slot
	dir       *dirTable // secret hash → key id
	now       int64
	live      map[*slot]struct{} // slots with a key actor: what ticks visit
	cl        *shardCluster      // cluster mode only (shardcluster.go)
	ctx       actor.Context      // its own, kept at start for receiveDirect
	onLive    func(delta int)    // metrics hook

	// The usage batch of this flush round: flushKey was sent to expect key
	// actors, got of them answered, parts hold the usage to log.
	expect, got int
	parts       keysUsed
	partOf      []batchMember
	spareOf     []batchMember // a logged batch's members array, for the next
	// Reused by direct deliveries in the shard's turn (no allocation).
	flushMsg  flushDirect
	loggedMsg loggedDirect
}

// shardPeers gives a shard the PIDs of all shards (sent once at start).
type shardPeers struct{ peers []*actor.PID }

// Receive is the shard's mailbox entry point: one method per message.
func (s *shard) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *authorize:
		s.authorize(ctx, m)
	case *actor.Started:
		s.ctx = ctx
	case *keyCmd:
		s.route(ctx, m.id, m, false)
	case createKey:
		m.reply <- s.create(m)
	case dirApply:
		s.applyDir(m.fx)
		close(m.done)
	case listKeys:
		m.reply <- s.list(ctx, m.owner)
	case capture:
		m.reply <- s.capture(ctx)
	case tick:
		s.tick(ctx, m)
	case flushAll:
		s.flushAll(ctx, m)
	case usagePart:
		s.usagePart(ctx, m)
	case keyDirty:
		s.markDirty(m.id)
	case batchLogged:
		s.batchLogged(ctx, m)
	case passivated:
		s.passivated(ctx, m)
	case keyGone:
		s.gone(ctx, m.id)
	case shardPeers:
		s.peers = m.peers
	case enableCluster:
		s.cl = newShardCluster()
	case *foreignKey:
		s.foreignKey(ctx, m)
	case needAllow:
		s.needAllow(ctx, m)
	case clusterReady:
		s.clusterReady(ctx, m)
	case clusterReleased:
		s.clusterReleased(ctx, m)
	}
}

// receiveDirect takes an authorization straight from Service.authorize
// (inlineMailbox.deliver) and declines everything else. It acts through
// the shard's own context, kept from its start: the one its mailbox runs
// use, and the caller holds the shard's turn.
func (s *shard) receiveDirect(msg any) bool {
	m, ok := msg.(*authorize)
	if !ok || s.ctx == nil {
		return false
	}
	s.authorize(s.ctx, m)
	return true
}

func (s *shard) authorize(ctx actor.Context, m *authorize) {
	if !m.routed {
		id, ok := s.dir.get(m.hash)
		if !ok {
			m.reply <- AuthResult{Err: ErrKeyInvalid}
			return
		}
		m.id, m.routed = id, true
		if home := shardOfID(id, s.n); home != s.idx {
			ctx.Send(s.peers[home], m)
			return
		}
	}
	s.route(ctx, m.id, m, m.consume)
}

// route delivers msg to the key actor owning id, activating it if passive.
func (s *shard) route(ctx actor.Context, id uuid.UUID, msg any, consume bool) {
	sl := s.keys.get(id)
	if sl == nil {
		s.reject(msg)
		return
	}
	if sl.live == nil {
		s.activate(ctx, sl)
	}
	l := sl.live
	if l.passivating {
		l.held.msgs = append(l.held.msgs, msg)
		return
	}
	l.lastSeen = s.now
	l.dirty = l.dirty || consume
	if _, ok := msg.(*authorize); ok && l.mb.deliver(msg, l) {
		return
	}
	ctx.Send(l.pid, msg)
}

// reject answers a message for a key that does not exist (any more).
func (s *shard) reject(msg any) {
	switch m := msg.(type) {
	case *authorize:
		m.reply <- AuthResult{Err: ErrKeyInvalid}
	case *keyCmd:
		m.reply <- keyReply{err: ErrKeyNotFound}
	case flushNow:
		m.wg.Done()
	case *foreignKey:
		m.reply <- foreignReply{}
	}
}

func (s *shard) activate(ctx actor.Context, sl *slot) {
	st := &sl.st
	live := &liveSlot{owner: st.rec.owner}
	sl.live = live
	var kc *keyCluster
	if s.cl != nil {
		kc = &keyCluster{cs: -1, ca: s.cl.allow[st.rec.id]}
		delete(s.cl.allow, st.rec.id)
	}
	live.pid = ctx.Spawn(s.deps.keyProps(func() actor.Actor {
		live.ka.start(s.deps, st, kc)
		return &live.ka
	}, &live.mb))
	s.live[sl] = struct{}{}
	s.onLive(1)
}

// create applies a logged creation: the key's slot, and the directory
// entries that map to this shard; the rest go back to Service in the reply.
func (s *shard) create(m createKey) keyReply {
	id := m.ev.rec.id
	if s.keys.get(id) != nil {
		return keyReply{err: fmt.Errorf("create key %s: duplicate id: %w", id, actors.ErrInvalidArgument)}
	}
	next, fx, _ := applyKey(nil, m.seq, m.ev)
	x := &slot{st: *next}
	s.keys.put(x)
	return keyReply{info: x.st.info(), fx: s.applyDir(fx)}
}

// applyDir applies the directory effects whose hashes map to this shard and
// returns the others.
func (s *shard) applyDir(fx dirEffects) (rest dirEffects) {
	rest.id = fx.id
	for _, h := range fx.drop {
		if shardOfHash(h, s.n) != s.idx {
			rest.drop = append(rest.drop, h)
		} else {
			s.dir.del(h, fx.id)
		}
	}
	for _, h := range fx.add {
		if shardOfHash(h, s.n) != s.idx {
			rest.add = append(rest.add, h)
		} else {
			s.dir.put(h, fx.id)
		}
	}
	return rest
}

// list answers the keys of owner: passive ones at once, live ones through
// their actors onto a channel sized so no actor ever blocks on it.
func (s *shard) list(ctx actor.Context, owner uuid.UUID) listReply {
	var r listReply
	var ask []uuid.UUID
	s.keys.each(func(sl *slot) {
		switch {
		case sl.live == nil:
			if sl.st.rec.owner == owner {
				r.infos = append(r.infos, sl.st.info())
			}
		case sl.live.owner == owner:
			ask = append(ask, sl.st.rec.id)
		}
	})
	r.more = len(ask)
	r.live = make(chan keyReply, len(ask))
	for _, id := range ask {
		s.route(ctx, id, &keyCmd{id: id, op: opGet, reply: r.live}, false)
	}
	return r
}

// capture encodes every passive key and asks live ones for their durable copy.
func (s *shard) capture(ctx actor.Context) captureReply {
	w := enc{b: make([]byte, 0, s.keys.len()*encodedKeyEstimate)}
	r := captureReply{}
	var live []*slot
	s.keys.each(func(sl *slot) {
		if sl.live == nil {
			encodeKeyState(&w, &sl.st)
			r.count++
			return
		}
		live = append(live, sl)
	})
	r.buf, r.more = w.b, len(live)
	r.live = make(chan []byte, len(live))
	for _, sl := range live {
		if l := sl.live; l.passivating {
			l.held.captures = append(l.held.captures, r.live)
		} else {
			ctx.Send(l.pid, captureKey{out: r.live})
		}
	}
	return r
}

// tick visits only live slots: with a million passive keys, scanning them
// all every flush interval would cost more than the flushes. A dirty key
// whose actor is idle is flushed directly (inlineMailbox.deliver), in the
// key actor's turn: a round over thousands of keys would otherwise cost
// three actor messages per key (flushKey, usagePart, usageLogged).
func (s *shard) tick(ctx actor.Context, m tick) {
	s.now = m.now
	s.logBatch(ctx) // what the last round's stragglers did not complete
	s.expect, s.got = 0, 0
	for sl := range s.live {
		l := sl.live
		if l == nil || l.passivating {
			continue
		}
		if l.dirty {
			l.dirty = false
			s.expect++
			if l.mb.deliver(&s.flushMsg, l) {
				p := s.flushMsg.part
				s.flushMsg = flushDirect{}
				p.pid = l.pid
				s.takePart(p, sl, l)
			} else {
				ctx.Send(l.pid, flushKey{})
			}
		} else if m.sweep && s.now-l.lastSeen >= s.idleAfter {
			l.passivating, l.held = true, &held{}
			ctx.Send(l.pid, passivate{})
		}
	}
	if s.got >= s.expect { // every key answered directly
		s.logBatch(ctx)
	}
}

// usagePart takes a key actor's answer to flushKey sent through its
// mailbox; the round's last answer logs the batch.
func (s *shard) usagePart(ctx actor.Context, m usagePart) {
	var sl *slot
	var l *liveSlot
	if m.ev.id != uuid.Nil {
		if sl = s.keys.get(m.ev.id); sl != nil {
			l = sl.live
		}
	}
	s.takePart(m, sl, l)
	if s.got >= s.expect {
		s.logBatch(ctx)
	}
}

// takePart adds a key actor's answer to the round's batch; sl and l are
// its slot and live handle (nil when unknown).
func (s *shard) takePart(m usagePart, sl *slot, l *liveSlot) {
	s.got++
	if m.again {
		s.markDirty(m.ev.id)
	}
	if len(m.ev.pairs) > 0 {
		s.parts = append(s.parts, m.ev)
		s.partOf = append(s.partOf, batchMember{pid: m.pid, sl: sl, l: l})
	}
}

// batchLogged hands the WAL's answer to each key actor of the batch:
// straight to an idle one still live in its slot, else through its
// mailbox.
func (s *shard) batchLogged(ctx actor.Context, m batchLogged) {
	for _, b := range m.of {
		if b.l != nil && b.sl.live == b.l && !b.l.passivating {
			s.loggedMsg = loggedDirect{m: usageLogged{seq: m.seq, err: m.err}}
			if b.l.mb.deliver(&s.loggedMsg, b.l) {
				continue
			}
		}
		ctx.Send(b.pid, usageLogged{seq: m.seq, err: m.err})
	}
	s.loggedMsg = loggedDirect{}
	clear(m.of)
	s.spareOf = m.of[:0]
}

func (s *shard) markDirty(id uuid.UUID) {
	if sl := s.keys.get(id); sl != nil && sl.live != nil {
		sl.live.dirty = true
	}
}

// logBatch appends the collected usage as one keysUsed record; the WAL's
// answer goes to each key actor of the batch (through this shard, so that
// it reaches them before any snapshot capture the shard forwards after).
func (s *shard) logBatch(ctx actor.Context) {
	if len(s.parts) == 0 {
		return
	}
	of := s.partOf
	rec := s.parts.record() // encoded now: the parts array is reused
	clear(s.parts)
	s.parts, s.partOf, s.spareOf = s.parts[:0], s.spareOf, nil
	self, c := ctx.Self(), s.deps.courier
	s.deps.log.AppendAsync([]wal.Record{rec}, func(seq uint64, err error) {
		c.post(self, batchLogged{seq: seq, err: err, of: of})
	})
}

func (s *shard) flushAll(ctx actor.Context, m flushAll) {
	for sl := range s.live {
		m.wg.Add(1)
		l := sl.live
		if l.passivating {
			// A key with unlogged usage refuses to passivate: it must
			// flush too. passivated settles the request either way.
			l.held.msgs = append(l.held.msgs, flushNow{wg: m.wg})
			continue
		}
		ctx.Send(l.pid, flushNow{wg: m.wg})
	}
	m.wg.Done()
}

func (s *shard) passivated(ctx actor.Context, m passivated) {
	sl := s.keys.get(m.id)
	if sl == nil || sl.live == nil || !sl.live.passivating {
		return
	}
	l := sl.live
	h := l.held
	l.passivating, l.held = false, nil
	if m.state != nil {
		if m.ca != nil && s.cl != nil {
			s.cl.allow[m.id] = m.ca
		}
		ctx.Poison(l.pid)
		if m.state != &sl.st {
			sl.st = *m.state
		}
		sl.live = nil
		delete(s.live, sl)
		s.onLive(-1)
		for _, out := range h.captures {
			var w enc
			encodeKeyState(&w, &sl.st)
			out <- w.b
		}
	} else {
		for _, out := range h.captures {
			ctx.Send(l.pid, captureKey{out: out})
		}
	}
	for _, msg := range h.msgs {
		if f, ok := msg.(flushNow); ok {
			if m.state != nil {
				f.wg.Done() // passivated: nothing was unlogged
			} else {
				ctx.Send(l.pid, f)
			}
			continue
		}
		var consume bool
		if a, ok := msg.(*authorize); ok {
			consume = a.consume
		}
		s.route(ctx, m.id, msg, consume)
	}
}

func (s *shard) gone(ctx actor.Context, id uuid.UUID) {
	sl := s.keys.get(id)
	if sl == nil {
		return
	}
	s.keys.del(id)
	if s.cl != nil {
		delete(s.cl.allow, id)
	}
	l := sl.live
	if l == nil {
		return
	}
	ctx.Poison(l.pid)
	sl.live = nil // a batch's commit notice still holding sl finds no actor
	delete(s.live, sl)
	s.onLive(-1)
	if h := l.held; h != nil {
		for _, out := range h.captures {
			out <- nil // counted, carries nothing: the key is gone
		}
		for _, msg := range h.msgs {
			s.reject(msg)
		}
	}
}

// shardOfID picks the shard that owns a key id.
func shardOfID(id uuid.UUID, n int) int {
	return int(uint64(id[0])<<24|uint64(id[1])<<16|uint64(id[2])<<8|uint64(id[3])) % n
}
