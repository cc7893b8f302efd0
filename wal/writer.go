package wal

import (
	"fmt"
	"runtime"
	"time"
)

// maxKeptBuf is the largest batch buffer the writer keeps for reuse.
const maxKeptBuf = 8 << 20

// request is one Append or AppendAsync call waiting for the writer.
type request struct {
	recs []Record
	done func(last uint64, err error) // AppendAsync; nil for Append
	ch   chan result                  // Append; nil for AppendAsync
}

type result struct {
	last uint64
	err  error
}

// Append writes recs as consecutive sequence numbers and returns the last
// one. It returns only after the batch holding recs is committed and
// fsynced; concurrent callers share commits. recs are committed all or
// nothing. Errors: ErrInvalidRecord (empty call, Type 0, oversize payload),
// ErrClosed, or ErrFailed (this commit or an earlier one failed).
func (l *Log) Append(recs ...Record) (last uint64, err error) {
	if err := validate(recs); err != nil {
		return 0, fmt.Errorf("append: %w", err)
	}
	req := l.pool.Get().(*request)
	req.recs = recs
	if err := l.enqueue(req); err != nil {
		req.recs = nil
		l.pool.Put(req)
		return 0, err
	}
	res := <-req.ch
	req.recs = nil
	l.pool.Put(req)
	return res.last, res.err
}

// AppendAsync enqueues recs and returns without waiting for the commit; it
// blocks only while the writer's queue is full. done (may be nil) is called
// exactly once with what Append would have returned: from the writer
// goroutine after the commit, or synchronously, before AppendAsync returns,
// when recs are invalid or the log is closed. done must not block and must
// not call the Log. recs must not be modified until done is called.
// Records of successive AppendAsync calls from one goroutine get increasing
// sequences.
func (l *Log) AppendAsync(recs []Record, done func(last uint64, err error)) {
	if done == nil {
		done = func(uint64, error) {}
	}
	if err := validate(recs); err != nil {
		done(0, fmt.Errorf("append async: %w", err))
		return
	}
	if err := l.enqueue(&request{recs: recs, done: done}); err != nil {
		done(0, err)
	}
}

// enqueue hands req to the writer unless the log is closed.
func (l *Log) enqueue(req *request) error {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.closed {
		return ErrClosed
	}
	if err := l.Err(); err != nil {
		return err
	}
	l.reqs <- req
	return nil
}

// run is the writer goroutine: it takes the first queued request, gathers
// whatever else is queued up to MaxBatch records, commits them in one
// transaction and answers every request of the batch. It returns once Close
// has closed the queue and every queued request is answered.
func (l *Log) run() {
	defer close(l.done)
	var (
		carry  *request
		expect int           // requests the next batch should hold
		budget time.Duration // longest wait for them
	)
	for {
		first := carry
		if first == nil {
			var ok bool
			if first, ok = <-l.reqs; !ok {
				return
			}
		}
		var batch []*request
		var n int
		batch, n, carry = l.collect(first, expect, time.Now().Add(budget))
		answered := syncRequests(batch) // before reply: then callers reuse them
		start := time.Now()
		base, err := l.commit(batch, n)
		took := time.Since(start)
		l.reply(batch, base, err)
		// Callers queued during this commit are due next, and so are the
		// Append callers just answered if they append again at once. Without
		// waiting for the latter, closed-loop callers split into two halves
		// that alternate, and batches are half as large as they could be.
		expect = len(l.reqs) + answered
		budget = min(took/4, maxLinger)
		clear(batch)
		l.batch = batch[:0]
	}
}

// maxLinger caps how long a batch waits for expected callers.
const maxLinger = 250 * time.Microsecond

// collect returns first plus queued requests that fit within MaxBatch
// records, their record count, and the queued request that did not fit, if
// any. A first request larger than MaxBatch forms a batch on its own. While
// the batch holds fewer than expect requests, collect keeps polling the
// queue, yielding the processor, until deadline.
func (l *Log) collect(first *request, expect int, deadline time.Time) (batch []*request, n int, carry *request) {
	batch = append(l.batch[:0], first)
	n = len(first.recs)
	for n < l.cfg.MaxBatch {
		select {
		case r, ok := <-l.reqs:
			if !ok {
				return batch, n, nil
			}
			if n+len(r.recs) > l.cfg.MaxBatch {
				return batch, n, r
			}
			batch = append(batch, r)
			n += len(r.recs)
		default:
			if len(batch) >= expect || !time.Now().Before(deadline) {
				return batch, n, nil
			}
			runtime.Gosched()
		}
	}
	return batch, n, nil
}

// syncRequests counts the Append (not AppendAsync) requests of batch.
func syncRequests(batch []*request) int {
	n := 0
	for _, r := range batch {
		if r.ch != nil {
			n++
		}
	}
	return n
}

// commit writes the n records of batch in one write transaction, numbered
// from the stored last index + 1, and returns that stored last index (base).
// On error nothing is written and the numbering is unchanged.
func (l *Log) commit(batch []*request, n int) (base uint64, err error) {
	if err := l.Err(); err != nil {
		return 0, err // queued before the failure: refused like later ones
	}
	start := time.Now()
	tx, err := l.db.Begin(true)
	if err != nil {
		return 0, fmt.Errorf("commit batch: begin: %w", err)
	}
	defer func() { _ = tx.Rollback() }()

	logb, meta := tx.Bucket(bucketLog), tx.Bucket(bucketMeta)
	if base, err = getLast(meta); err != nil {
		return 0, fmt.Errorf("commit batch: %w", err)
	}
	logb.FillPercent = 1.0 // keys only ever grow: pack pages full
	// bbolt keeps the key and value slices until Commit, so they all live in
	// one buffer, sized up front and reused by the next batch.
	buf := l.growBuf(batch, n)
	seq := base
	for _, r := range batch {
		for _, rec := range r.recs {
			seq++
			k := len(buf)
			buf = appendKey(buf, seq)
			v := len(buf)
			buf = appendRecord(buf, seq, rec)
			if err := logb.Put(buf[k:v:v], buf[v:]); err != nil {
				return 0, fmt.Errorf("commit batch: put index %d: %w", seq, err)
			}
		}
	}
	if err := putLast(meta, buf, seq); err != nil {
		return 0, fmt.Errorf("commit batch: put last index %d: %w", seq, err)
	}
	if fault := l.fault.Load(); fault != nil {
		if err := (*fault)(); err != nil {
			return 0, l.fail(fmt.Errorf("commit batch at index %d: %w", base+1, err))
		}
	}
	if err := tx.Commit(); err != nil {
		return 0, l.fail(fmt.Errorf("commit batch at index %d: %w", base+1, err))
	}
	l.commits.Add(1)
	l.m.commitDuration.Observe(time.Since(start).Seconds())
	l.m.batchRecords.Observe(float64(n))
	l.m.appended.Add(float64(n))
	return base, nil
}

// growBuf returns l.buf emptied, with capacity for every key, envelope and
// the meta value of the batch.
func (l *Log) growBuf(batch []*request, n int) []byte {
	size := n*(8+headerSize) + lastSize
	for _, r := range batch {
		for _, rec := range r.recs {
			size += len(rec.Data)
		}
	}
	if size > maxKeptBuf {
		return make([]byte, 0, size)
	}
	if cap(l.buf) < size {
		l.buf = make([]byte, 0, max(size, 64<<10))
	}
	return l.buf[:0]
}

// reply answers every request of a committed (err == nil) or failed batch.
func (l *Log) reply(batch []*request, base uint64, err error) {
	seq := base
	for _, r := range batch {
		var last uint64
		if err == nil {
			seq += uint64(len(r.recs))
			last = seq
		}
		if r.ch != nil {
			r.ch <- result{last: last, err: err}
			continue
		}
		r.done(last, err)
	}
}
