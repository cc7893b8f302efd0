package wal

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"go.etcd.io/bbolt"
)

var (
	bucketLog  = []byte("log")
	bucketMeta = []byte("meta")
	keyLast    = []byte("last")
)

// queueSize is how many Append/AppendAsync calls may wait for the writer
// before callers block.
const queueSize = 1024

// Log is a write-ahead log in one bbolt file. All methods are safe for
// concurrent use.
type Log struct {
	cfg Config
	db  *bbolt.DB
	lg  *slog.Logger
	m   *metrics
	reg prometheus.Registerer

	mu     sync.RWMutex // guards closed; read-held while sending on reqs and during transactions
	closed bool
	reqs   chan *request
	done   chan struct{} // closed when the writer goroutine exits
	pool   sync.Pool     // *request for Append

	commits atomic.Uint64 // committed batches (tests)

	badMu sync.Mutex
	bad   []BadRecord // what Open found bad, less what TruncateBefore deleted since

	// failure is the first commit error, wrapped in ErrFailed: set once by
	// the writer, read by every append (fail-stop, see ErrFailed).
	failure atomic.Pointer[error]
	// fault, when set, runs just before each commit and fails it with its
	// error: a failing disk, for tests (SetFaultHook).
	fault atomic.Pointer[func() error]

	// Owned by the writer goroutine.
	buf   []byte
	batch []*request
}

// Open opens or creates the log at cfg.Path, repairs it (see the package
// documentation) and starts the writer goroutine. lg may be nil; reg may be
// nil, in which case no metrics are registered.
func Open(cfg Config, lg *slog.Logger, reg prometheus.Registerer) (*Log, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if lg == nil {
		lg = slog.New(slog.DiscardHandler)
	}
	lg = lg.With("component", "wal")
	dir := filepath.Dir(cfg.Path)
	if fi, err := os.Stat(dir); err != nil {
		return nil, fmt.Errorf("open %s: parent directory: %w", cfg.Path, err)
	} else if !fi.IsDir() {
		return nil, fmt.Errorf("open %s: parent %s is not a directory", cfg.Path, dir)
	}
	db, err := bbolt.Open(cfg.Path, 0o600, &bbolt.Options{
		Timeout:        cfg.OpenTimeout,
		NoFreelistSync: true,
		NoSync:         cfg.NoSync,
	})
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", cfg.Path, err)
	}
	m := newMetrics()
	c, err := prepare(db, lg)
	if err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("open %s: %w", cfg.Path, err)
	}
	if err := m.register(reg); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("open %s: register metrics: %w", cfg.Path, err)
	}
	l := &Log{
		cfg:  cfg,
		db:   db,
		lg:   lg,
		m:    m,
		reg:  reg,
		reqs: make(chan *request, queueSize),
		done: make(chan struct{}),
		bad:  c.bad,
	}
	if len(c.bad) > 0 {
		m.corrupt.Set(float64(len(c.bad)))
		lg.Warn("corrupt records in the log: replay past them fails until the log is repaired",
			"path", cfg.Path, "bad", len(c.bad), "first", c.bad[0].String())
	}
	l.pool.New = func() any { return &request{ch: make(chan result, 1)} }
	go l.run()
	return l, nil
}

// Close waits for every queued append to be committed (or to fail), then
// closes the file and unregisters the metrics. Later calls to any method
// return ErrClosed.
func (l *Log) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return ErrClosed
	}
	l.closed = true
	close(l.reqs)
	l.mu.Unlock()

	<-l.done
	l.m.unregister(l.reg)
	if err := l.db.Close(); err != nil {
		return fmt.Errorf("close %s: %w", l.cfg.Path, err)
	}
	return nil
}

// Err returns nil while the log accepts writes, and the failure (wrapping
// ErrFailed and the disk's error) once a commit has failed.
func (l *Log) Err() error {
	if p := l.failure.Load(); p != nil {
		return *p
	}
	return nil
}

// fail makes the log fail-stop with cause; the first cause is kept.
func (l *Log) fail(cause error) error {
	err := fmt.Errorf("%w: %w", ErrFailed, cause)
	if l.failure.CompareAndSwap(nil, &err) {
		l.m.failed.Set(1)
		l.lg.Error("write-ahead log failed: refusing writes until restart", "err", cause)
	}
	return l.Err()
}

// SetFaultHook makes every later commit call fn just before writing and
// fail with its error, if any, as a disk that fails would; nil removes
// the hook. It is fault injection for tests (as etcd's failpoints), safe
// to call at any time.
func (l *Log) SetFaultHook(fn func() error) {
	if fn == nil {
		l.fault.Store(nil)
		return
	}
	l.fault.Store(&fn)
}

// FirstIndex returns the sequence of the oldest record, or 0 if the log is
// empty.
func (l *Log) FirstIndex() (uint64, error) {
	var first uint64
	err := l.view(func(tx *bbolt.Tx) error {
		k, _ := tx.Bucket(bucketLog).Cursor().First()
		if k == nil {
			return nil
		}
		if len(k) != 8 {
			return fmt.Errorf("first index: key %x: %w", k, ErrCorrupt)
		}
		first = binary.BigEndian.Uint64(k)
		return nil
	})
	return first, err
}

// LastIndex returns the last sequence ever assigned, even if TruncateBefore
// has since deleted it, or 0 if nothing was ever appended.
func (l *Log) LastIndex() (uint64, error) {
	var last uint64
	err := l.view(func(tx *bbolt.Tx) error {
		var err error
		last, err = getLast(tx.Bucket(bucketMeta))
		return err
	})
	return last, err
}

// truncateChunk bounds the records one TruncateBefore transaction deletes,
// so appends interleave and bbolt rebalances the emptied pages as it goes.
const truncateChunk = 8192

// TruncateBefore deletes every record with sequence < seq, in transactions
// of at most truncateChunk records. Numbering continues: the next Append
// still returns LastIndex()+1. seq > LastIndex()+1 returns ErrOutOfRange
// and deletes nothing. A crash part-way leaves a prefix deleted, which is
// what a completed call would have left of it.
func (l *Log) TruncateBefore(seq uint64) error {
	for {
		n, err := l.truncateSome(seq)
		if err != nil {
			return fmt.Errorf("truncate before %d: %w", seq, err)
		}
		if n < truncateChunk {
			l.forgetBefore(seq)
			return nil
		}
	}
}

// truncateSome deletes up to truncateChunk of the records below seq and
// reports how many. Keys are collected first and deleted by key: deleting
// under a cursor re-seeks from the first, emptied, page every time, which
// is quadratic in one transaction (seconds for 200k records).
func (l *Log) truncateSome(seq uint64) (n int, err error) {
	if err := l.Err(); err != nil {
		return 0, err
	}
	err = l.update(func(tx *bbolt.Tx) error {
		last, err := getLast(tx.Bucket(bucketMeta))
		if err != nil {
			return err
		}
		if last < math.MaxUint64 && seq > last+1 {
			return fmt.Errorf("last index %d: %w", last, ErrOutOfRange)
		}
		target := appendKey(nil, seq)
		b := tx.Bucket(bucketLog)
		keys := make([][]byte, 0, 256)
		c := b.Cursor()
		for k, _ := c.First(); k != nil && bytes.Compare(k, target) < 0 && len(keys) < truncateChunk; k, _ = c.Next() {
			keys = append(keys, bytes.Clone(k))
		}
		for _, k := range keys {
			if err := b.Delete(k); err != nil {
				return err
			}
		}
		n = len(keys)
		return nil
	})
	return n, err
}

// SetNext makes the next assigned sequence at least idx+1. It is meant for
// restoring from a snapshot at idx into an empty log, and returns
// ErrNotEmpty if the log holds records. It never lowers LastIndex.
func (l *Log) SetNext(idx uint64) error {
	return l.update(func(tx *bbolt.Tx) error {
		if k, _ := tx.Bucket(bucketLog).Cursor().First(); k != nil {
			return fmt.Errorf("set next %d: %w", idx, ErrNotEmpty)
		}
		meta := tx.Bucket(bucketMeta)
		last, err := getLast(meta)
		if err != nil {
			return fmt.Errorf("set next %d: %w", idx, err)
		}
		if idx <= last {
			return nil
		}
		return putLast(meta, make([]byte, 0, lastSize), idx)
	})
}

// forgetBefore drops the bad entries below seq from l.bad once
// TruncateBefore(seq) has deleted them.
func (l *Log) forgetBefore(seq uint64) {
	l.badMu.Lock()
	defer l.badMu.Unlock()
	kept := l.bad[:0]
	for _, b := range l.bad {
		switch {
		case b.Stray:
		case b.Through < seq:
			continue
		case b.Index < seq:
			b.Index = seq
		}
		kept = append(kept, b)
	}
	l.bad = kept
	l.m.corrupt.Set(float64(len(kept)))
}

// corruptAfter returns a *CorruptError listing the bad entries Replay(after)
// would meet (stray keys always), or nil.
func (l *Log) corruptAfter(after uint64) error {
	l.badMu.Lock()
	defer l.badMu.Unlock()
	var hit []BadRecord
	for _, b := range l.bad {
		if b.Stray || b.Through > after {
			hit = append(hit, b)
		}
	}
	if len(hit) == 0 {
		return nil
	}
	return &CorruptError{Path: l.cfg.Path, Bad: hit}
}

// view runs fn in a read transaction unless the log is closed.
func (l *Log) view(fn func(tx *bbolt.Tx) error) error {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.closed {
		return ErrClosed
	}
	return l.db.View(fn)
}

// update runs fn in a write transaction unless the log is closed.
func (l *Log) update(fn func(tx *bbolt.Tx) error) error {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.closed {
		return ErrClosed
	}
	return l.db.Update(fn)
}

// lastSize is the meta "last" value: uint64 big-endian | crc32c of those 8.
const lastSize = 12

// getLast reads the last assigned sequence; 0 if never set.
func getLast(meta *bbolt.Bucket) (uint64, error) {
	v := meta.Get(keyLast)
	if v == nil {
		return 0, nil
	}
	if len(v) != lastSize || crc32.Checksum(v[:8], castagnoli) != binary.BigEndian.Uint32(v[8:]) {
		return 0, fmt.Errorf("read last index: meta value %x: %w", v, ErrCorrupt)
	}
	return binary.BigEndian.Uint64(v), nil
}

// putLast stores last, encoding it into buf, which must stay unmodified until
// the transaction ends.
func putLast(meta *bbolt.Bucket, buf []byte, last uint64) error {
	buf = binary.BigEndian.AppendUint64(buf, last)
	buf = binary.BigEndian.AppendUint32(buf, crc32.Checksum(buf[len(buf)-8:], castagnoli))
	return meta.Put(keyLast, buf[len(buf)-lastSize:])
}
