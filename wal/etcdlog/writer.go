package etcdlog

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"gatehouse/wal"
)

// Writer batches appends to the log, the mirror of the bbolt WAL's group
// commit (wal/writer.go): one goroutine takes the appends queued meanwhile
// as one batch (one etcd transaction) and calls their done callbacks in
// order. An append is acknowledged only once it is durable on a majority
// of etcd; a failure, a timeout included, wraps the Writer's unavailable
// error, and nothing of that append is acknowledged.
//
// Like wal.Log's, AppendAsync's callbacks run on the writer goroutine and
// must not block.
type Writer struct {
	log         Appender
	timeout     time.Duration
	unavailable error
	written     atomic.Uint64 // the last record of an acknowledged append

	mu     sync.Mutex
	q      []appendReq
	closed bool
	wake   chan struct{} // capacity 1
	stop   chan struct{}
	done   chan struct{}
}

// Appender is what a Writer appends to: a *Log.
type Appender interface {
	Append(ctx context.Context, recs ...wal.Record) (last uint64, err error)
}

type appendReq struct {
	recs []wal.Record
	done func(last uint64, err error)
}

// writerBatch caps the records one transaction carries; Log.Append splits
// big batches itself, this only bounds the latency of the first callback.
const writerBatch = 1024

// NewWriter starts a Writer appending to log, each batch within timeout;
// its failures wrap unavailable (the caller's sentinel: actors.ErrUnavailable).
func NewWriter(log Appender, timeout time.Duration, unavailable error) *Writer {
	w := &Writer{log: log, timeout: timeout, unavailable: unavailable, wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	go w.run()
	return w
}

// Append appends recs and waits until they are durable.
func (w *Writer) Append(recs ...wal.Record) (uint64, error) {
	type res struct {
		last uint64
		err  error
	}
	ch := make(chan res, 1)
	w.AppendAsync(recs, func(last uint64, err error) { ch <- res{last, err} })
	r := <-ch
	return r.last, r.err
}

// AppendAsync queues recs; done is called once they are durable or failed.
func (w *Writer) AppendAsync(recs []wal.Record, done func(last uint64, err error)) {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		done(0, fmt.Errorf("%w: replicated log closed", w.unavailable))
		return
	}
	w.q = append(w.q, appendReq{recs: recs, done: done})
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// Written is the sequence number of the last record of the last
// acknowledged append (0: none yet).
func (w *Writer) Written() uint64 { return w.written.Load() }

func (w *Writer) run() {
	defer close(w.done)
	for {
		select {
		case <-w.wake:
		case <-w.stop:
			w.failQueued()
			return
		}
		for {
			w.mu.Lock()
			batch, n := w.take()
			w.mu.Unlock()
			if len(batch) == 0 {
				break
			}
			w.commit(batch, n)
		}
	}
}

// take removes the requests of the next batch from the queue (w.mu held).
func (w *Writer) take() ([]appendReq, int) {
	n, i := 0, 0
	for i < len(w.q) && (i == 0 || n+len(w.q[i].recs) <= writerBatch) {
		n += len(w.q[i].recs)
		i++
	}
	batch := append([]appendReq(nil), w.q[:i]...)
	w.q = append(w.q[:0], w.q[i:]...)
	return batch, n
}

func (w *Writer) commit(batch []appendReq, n int) {
	recs := make([]wal.Record, 0, n)
	for _, r := range batch {
		recs = append(recs, r.recs...)
	}
	ctx, cancel := context.WithTimeout(context.Background(), w.timeout)
	last, err := w.log.Append(ctx, recs...)
	cancel()
	if err != nil {
		err = fmt.Errorf("%w: replicated log: %w", w.unavailable, err)
		for _, r := range batch {
			r.done(0, err)
		}
		return
	}
	w.written.Store(max(w.written.Load(), last))
	// Sequence numbers inside one etcd transaction are its revision's
	// high bits plus the record's index (Seq), so the last of each
	// request is last minus the records after it.
	after := uint64(n)
	for _, r := range batch {
		after -= uint64(len(r.recs))
		r.done(last-after, nil)
	}
}

func (w *Writer) failQueued() {
	w.mu.Lock()
	q := w.q
	w.q, w.closed = nil, true
	w.mu.Unlock()
	for _, r := range q {
		r.done(0, fmt.Errorf("%w: replicated log closed", w.unavailable))
	}
}

// Close stops the writer after the batch in flight; queued appends fail.
func (w *Writer) Close() {
	select {
	case <-w.stop:
	default:
		close(w.stop)
	}
	<-w.done
}
