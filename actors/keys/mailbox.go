package keys

import (
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/asynkron/protoactor-go/actor"
)

// inlineMailbox is the mailbox of shards and key actors (inlineProps):
// protoactor's default mailbox (actor/mailbox.go) without what they do
// not use (message batches, mailbox middlewares). Its run function is
// bound once: the default's schedule allocates a method value for every
// run, and an authorization runs two mailboxes (shard, key actor), so
// that was two allocations per proxied request (issue 25). Both queues
// are plain slices under one mutex, so a live key actor's mailbox is one
// heap object and a slice instead of a ring buffer and a linked queue.
//
// The protocol is the default's: a poster that finds the mailbox idle
// marks it running and hands its run to the dispatcher (the synchronized
// dispatcher runs it on the poster's goroutine); the run processes
// system messages first, user messages unless suspended, and yields the
// processor every Throughput messages; a panic in the actor escalates
// to its supervisor with the message that caused it.
//
// A key actor's mailbox is a field of its liveSlot (shard.go), not an
// object of its own, and the four words deliver reads first (status,
// the counts, suspended) come last, next to the slot's flags and the key
// actor: for a key not used lately they are one cache miss, not three.
type inlineMailbox struct {
	mu          sync.Mutex
	user, sys   fifo
	invoker     actor.MessageInvoker
	dispatcher  actor.Dispatcher
	process     func()       // processMessages, bound once
	status      atomic.Int32 // mailboxIdle or mailboxRunning
	userN, sysN atomic.Int32
	suspended   atomic.Bool
}

const (
	mailboxIdle int32 = iota
	mailboxRunning
)

var _ actor.Mailbox = (*inlineMailbox)(nil)

func newInlineMailbox() actor.Mailbox {
	m := &inlineMailbox{}
	m.init()
	return m
}

// init readies a zero mailbox in place (a key actor's, inside its
// liveSlot); it is called once, before the mailbox is used.
func (m *inlineMailbox) init() { m.process = m.processMessages }

// PostUserMessage queues a message for the actor and schedules a run.
func (m *inlineMailbox) PostUserMessage(msg any) {
	m.mu.Lock()
	m.user.push(msg)
	m.mu.Unlock()
	m.userN.Add(1)
	m.schedule()
}

// PostSystemMessage queues a lifecycle message (start, stop, watch…).
func (m *inlineMailbox) PostSystemMessage(msg any) {
	m.mu.Lock()
	m.sys.push(msg)
	m.mu.Unlock()
	m.sysN.Add(1)
	m.schedule()
}

// RegisterHandlers is called once by protoactor when the actor spawns.
func (m *inlineMailbox) RegisterHandlers(invoker actor.MessageInvoker, dispatcher actor.Dispatcher) {
	m.invoker, m.dispatcher = invoker, dispatcher
}

// Start is a no-op: there are no mailbox middlewares to tell.
func (m *inlineMailbox) Start() {}

// UserMessageCount returns how many user messages wait.
func (m *inlineMailbox) UserMessageCount() int { return int(m.userN.Load()) }

func (m *inlineMailbox) schedule() {
	if m.status.CompareAndSwap(mailboxIdle, mailboxRunning) {
		m.dispatcher.Schedule(m.process)
	}
}

// directReceiver is an inline actor that can take some messages straight
// from a sender holding its turn (inlineMailbox.deliver).
type directReceiver interface {
	// receiveDirect handles msg and reports true, or reports false
	// having done nothing: msg then goes through the mailbox.
	receiveDirect(msg any) bool
}

// deliver hands msg to r on the caller's goroutine when the mailbox is
// idle, empty and not suspended: the caller takes the actor's turn, as the
// synchronized dispatcher would have run the mailbox on the caller's
// goroutine, but without the queue and protoactor's per-message context
// (processMessage, the envelope, the PID lookup), which for a key not
// seen lately are cache misses on five objects (issue 25). The actor
// still handles one message at a time: the turn is the same status flag
// a mailbox run holds. It reports false, having done nothing, when the
// actor is busy or has messages waiting (so no message is overtaken) or
// when r declines msg; the caller then sends msg as usual. A panic in r
// is escalated to the actor's supervisor, as in a mailbox run.
func (m *inlineMailbox) deliver(msg any, r directReceiver) (done bool) {
	if m.userN.Load() != 0 || m.sysN.Load() != 0 || m.suspended.Load() ||
		!m.status.CompareAndSwap(mailboxIdle, mailboxRunning) {
		return false
	}
	defer m.endTurn()
	defer func() {
		if v := recover(); v != nil {
			m.invoker.EscalateFailure(v, msg)
			done = true
		}
	}()
	return r.receiveDirect(msg)
}

// endTurn ends a turn taken by deliver: what was posted meanwhile (the
// posters found the mailbox running) is processed now, as at the end of
// a run.
func (m *inlineMailbox) endTurn() {
	m.status.Store(mailboxIdle)
	if m.sysN.Load() <= 0 && (m.suspended.Load() || m.userN.Load() <= 0) {
		return
	}
	if m.status.CompareAndSwap(mailboxIdle, mailboxRunning) {
		m.dispatcher.Schedule(m.process)
	}
}

func (m *inlineMailbox) processMessages() {
	for {
		m.run()
		m.status.Store(mailboxIdle)
		// A message posted after run saw the queues empty, but before the
		// status was idle, found the mailbox running and did not schedule:
		// take it here.
		if m.sysN.Load() <= 0 && (m.suspended.Load() || m.userN.Load() <= 0) {
			return
		}
		if !m.status.CompareAndSwap(mailboxIdle, mailboxRunning) {
			return // that poster scheduled a run of its own
		}
	}
}

func (m *inlineMailbox) run() {
	var msg any
	defer func() {
		if r := recover(); r != nil {
			m.invoker.EscalateFailure(r, msg)
		}
	}()
	i, t := 0, m.dispatcher.Throughput()
	for {
		if i > t {
			i = 0
			runtime.Gosched()
		}
		i++
		var ok bool
		if msg, ok = m.popSys(); ok {
			m.sysN.Add(-1)
			switch msg.(type) {
			case *actor.SuspendMailbox:
				m.suspended.Store(true)
			case *actor.ResumeMailbox:
				m.suspended.Store(false)
			default:
				m.invoker.InvokeSystemMessage(msg)
			}
			continue
		}
		if m.suspended.Load() {
			return
		}
		if msg, ok = m.popUser(); !ok {
			return
		}
		m.userN.Add(-1)
		m.invoker.InvokeUserMessage(msg)
	}
}

func (m *inlineMailbox) popSys() (any, bool) {
	if m.sysN.Load() == 0 {
		return nil, false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.sys.pop()
}

func (m *inlineMailbox) popUser() (any, bool) {
	m.mu.Lock()
	msg, ok := m.user.pop()
	m.mu.Unlock()
	return msg, ok
}

// fifo is a slice queue: push appends, pop takes from head. It reuses its
// array once drained, and moves what is left to the front when more than
// half of it is taken, so a mailbox that never quite drains stays bounded
// by what waits in it.
type fifo struct {
	buf  []any
	head int
}

func (q *fifo) push(v any) {
	if q.head > 32 && q.head > len(q.buf)/2 {
		n := copy(q.buf, q.buf[q.head:])
		clear(q.buf[n:])
		q.buf, q.head = q.buf[:n], 0
	}
	q.buf = append(q.buf, v)
}

func (q *fifo) pop() (any, bool) {
	if q.head == len(q.buf) {
		return nil, false
	}
	v := q.buf[q.head]
	q.buf[q.head] = nil
	q.head++
	if q.head == len(q.buf) {
		q.buf, q.head = q.buf[:0], 0
	}
	return v, true
}
