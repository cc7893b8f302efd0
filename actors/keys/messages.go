package keys

import (
	"sync"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/google/uuid"
)

// Messages between Service, shard actors and key actors. Replies travel on
// channels inside the message (buffered, so an actor never blocks on a
// caller that gave up): ENGINE-NOTES measured this about 5x cheaper than
// RequestFuture on the hot path. None of these leave the process.

// authorize asks whether a secret (by hash) may be used; consume counts it
// against the limit and in usage. Pooled: see Service.Authorize.
type authorize struct {
	hash    hash
	id      uuid.UUID // filled in by the directory shard
	routed  bool
	consume bool
	// forwarded: another node checked the secret and forwarded the
	// admission to this node, the owner of the key's shard (cluster mode).
	forwarded bool
	reply     chan AuthResult
}

// keyOp names a command for one key.
type keyOp uint8

const (
	opGet keyOp = iota + 1
	opUsage
	opRotate
	opRevoke
	opDelete
	opUpdate
)

// mutates reports whether op changes the key (and so is logged).
func (op keyOp) mutates() bool { return op != opGet && op != opUsage }

// keyCmd is a command for one key, routed by id.
type keyCmd struct {
	id    uuid.UUID
	op    keyOp
	days  int        // opUsage
	rot   keyRotated // opRotate: prepared by Service (new secret already sealed)
	patch KeyPatch   // opUpdate
	reply chan keyReply
}

// keyReply answers a keyCmd. fx are the directory changes the command's
// event implies that the replying actor did not make itself; Service
// delivers them (publish) before answering its caller.
type keyReply struct {
	info  KeyInfo
	usage Usage
	fx    dirEffects
	err   error
}

// createKey asks the home shard to create a key from an event logged at seq.
type createKey struct {
	ev    keyCreated
	seq   uint64
	reply chan keyReply
}

// dirApply makes a directory shard apply the directory effects of a key
// event that concern it; done is closed once they are applied.
type dirApply struct {
	fx   dirEffects
	done chan struct{}
}

// listKeys asks a shard for the keys of one owner (all keys if all is set).
type listKeys struct {
	owner uuid.UUID
	reply chan listReply
}

// listReply carries what the shard knew directly and a channel on which
// `more` live key actors will each send one reply.
type listReply struct {
	infos []KeyInfo
	more  int
	live  chan keyReply
}

// capture asks a shard for a durable copy of all its keys (for a snapshot).
type capture struct {
	reply chan captureReply
}

// captureReply carries the passive keys, encoded (count of them in buf),
// and a channel on which `more` live key actors each send their encoded
// durable copy.
type captureReply struct {
	buf   []byte
	count int
	more  int
	live  chan []byte
}

// captureKey asks one key actor for its encoded durable copy.
type captureKey struct{ out chan []byte }

// tick drives flushes and passivation; sent by Service.Tick (the engine's ticker).
type tick struct {
	now   int64 // Unix seconds
	sweep bool
}

// flushKey asks a key actor to log its pending usage.
type flushKey struct{}

// usagePart is a key actor's answer to flushKey: its pending usage, now
// inflight, for its shard's batch (no pairs: nothing to log). again: the
// key's previous batch is still in flight, keep key ev.id dirty.
type usagePart struct {
	pid   *actor.PID
	ev    keyUsed
	again bool
}

// keyDirty asks a shard to flush the key at the next tick: a key actor
// whose usage batch failed to log holds its deltas again.
type keyDirty struct{ id uuid.UUID }

// batchLogged is the WAL's answer to a shard's usage batch, for the key
// actors whose usage it held.
type batchLogged struct {
	seq uint64
	err error
	of  []batchMember
}

// batchMember is a key actor whose usage a shard's batch holds: its PID,
// and its slot and live handle when the shard knew them (for direct
// delivery of the answer, while the slot still has that actor).
type batchMember struct {
	pid *actor.PID
	sl  *slot
	l   *liveSlot
}

// flushDirect is flushKey delivered by the shard's tick straight to an
// idle key actor (inlineMailbox.deliver): the actor leaves its answer in
// part (its pid unset) instead of sending it.
type flushDirect struct{ part usagePart }

// loggedDirect is usageLogged delivered by the shard straight to an idle
// key actor. The actor declines it when it needs its context (a failed
// batch, or flushNow waiters with usage pending).
type loggedDirect struct{ m usageLogged }

// flushAll asks a shard (and then each live key actor) to log pending usage
// synchronously; wg.Done is called once per flushed actor and once by the shard.
type flushAll struct{ wg *sync.WaitGroup }

// flushNow is flushAll's message to one key actor.
type flushNow struct{ wg *sync.WaitGroup }

// usageLogged reports the outcome of a key actor's asynchronous usage append.
type usageLogged struct {
	seq uint64
	err error
}

// passivate asks an idle key actor to hand its state back to its shard.
type passivate struct{}

// passivated is a key actor's answer: state is nil when it refused (busy).
type passivated struct {
	id    uuid.UUID
	state *keyState
	ca    *clusterAllow // cluster mode: the key's Allowance, if it had one
}

// keyGone tells the shard a key actor logged its deletion.
type keyGone struct{ id uuid.UUID }
