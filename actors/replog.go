package actors

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"gatehouse/wal"
)

// replicatedLog is the EventLog of cluster mode: the actors' appends go to
// the replicated log (etcd) through one writer goroutine, which takes the
// appends queued meanwhile as one batch (one etcd transaction) and calls
// their done callbacks in order. An append is acknowledged only once it is
// durable on a majority of etcd; a failure, a timeout included, is
// ErrUnavailable, and the actors acknowledge nothing for it.
//
// Like wal.Log's, AppendAsync's callbacks run on the writer goroutine and
// must not block (the actors post through the courier).
type replicatedLog struct {
	rl      ReplicatedLog
	timeout time.Duration
	written atomic.Uint64 // the last record of an acknowledged append

	mu     sync.Mutex
	q      []appendReq
	closed bool
	wake   chan struct{} // capacity 1
	stop   chan struct{}
	done   chan struct{}
}

type appendReq struct {
	recs []wal.Record
	done func(last uint64, err error)
}

// replicatedBatch caps the records one transaction carries; etcdlog splits
// big batches itself, this only bounds the latency of the first callback.
const replicatedBatch = 1024 // etcdlog.MaxBatch

func newReplicatedLog(rl ReplicatedLog, timeout time.Duration) *replicatedLog {
	l := &replicatedLog{rl: rl, timeout: timeout, wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	go l.run()
	return l
}

// Append appends recs and waits until they are durable.
func (l *replicatedLog) Append(recs ...wal.Record) (uint64, error) {
	type res struct {
		last uint64
		err  error
	}
	ch := make(chan res, 1)
	l.AppendAsync(recs, func(last uint64, err error) { ch <- res{last, err} })
	r := <-ch
	return r.last, r.err
}

// AppendAsync queues recs; done is called once they are durable or failed.
func (l *replicatedLog) AppendAsync(recs []wal.Record, done func(last uint64, err error)) {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		done(0, fmt.Errorf("%w: replicated log closed", ErrUnavailable))
		return
	}
	l.q = append(l.q, appendReq{recs: recs, done: done})
	l.mu.Unlock()
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

func (l *replicatedLog) run() {
	defer close(l.done)
	for {
		select {
		case <-l.wake:
		case <-l.stop:
			l.failQueued()
			return
		}
		for {
			l.mu.Lock()
			batch, n := l.take()
			l.mu.Unlock()
			if len(batch) == 0 {
				break
			}
			l.commit(batch, n)
		}
	}
}

// take removes the requests of the next batch from the queue (l.mu held).
func (l *replicatedLog) take() ([]appendReq, int) {
	n, i := 0, 0
	for i < len(l.q) && (i == 0 || n+len(l.q[i].recs) <= replicatedBatch) {
		n += len(l.q[i].recs)
		i++
	}
	batch := append([]appendReq(nil), l.q[:i]...)
	l.q = append(l.q[:0], l.q[i:]...)
	return batch, n
}

func (l *replicatedLog) commit(batch []appendReq, n int) {
	recs := make([]wal.Record, 0, n)
	for _, r := range batch {
		recs = append(recs, r.recs...)
	}
	ctx, cancel := context.WithTimeout(context.Background(), l.timeout)
	last, err := l.rl.Append(ctx, recs...)
	cancel()
	if err != nil {
		err = fmt.Errorf("%w: replicated log: %w", ErrUnavailable, err)
		for _, r := range batch {
			r.done(0, err)
		}
		return
	}
	l.written.Store(max(l.written.Load(), last))
	// Sequence numbers inside one etcd transaction are its revision's
	// high bits plus the record's index (etcdlog.Seq), so the last of each
	// request is last minus the records after it.
	after := uint64(n)
	for _, r := range batch {
		after -= uint64(len(r.recs))
		r.done(last-after, nil)
	}
}

func (l *replicatedLog) failQueued() {
	l.mu.Lock()
	q := l.q
	l.q, l.closed = nil, true
	l.mu.Unlock()
	for _, r := range q {
		r.done(0, fmt.Errorf("%w: replicated log closed", ErrUnavailable))
	}
}

// close stops the writer after the batch in flight; queued appends fail.
func (l *replicatedLog) close() {
	select {
	case <-l.stop:
	default:
		close(l.stop)
	}
	<-l.done
}

var errNotReplicated = errors.New("actors: not available in cluster mode")
