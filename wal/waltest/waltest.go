// Package waltest holds test helpers for code that uses package wal.
//
// Open returns a *wal.Log in a fresh t.TempDir() and registers a cleanup that
// closes the log and then runs bbolt's consistency check (tx.Check) on the
// file, as bbolt's btesting does, failing the test on any error:
//
//	l := waltest.Open(t)                                  // NoSync, temp dir
//	l := waltest.Open(t, waltest.WithPath(p), waltest.WithSync())
//
// The helpers are safe to use from parallel tests; each call owns its file.
package waltest

import (
	"errors"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.etcd.io/bbolt"

	"gatehouse/wal"
)

// Option changes how Open opens the log.
type Option func(*options)

type options struct {
	cfg wal.Config
	reg prometheus.Registerer
}

// WithPath opens the log at path instead of a new file in t.TempDir().
func WithPath(path string) Option { return func(o *options) { o.cfg.Path = path } }

// WithSync turns fsync on (Open defaults to NoSync for speed).
func WithSync() Option { return func(o *options) { o.cfg.NoSync = false } }

// WithConfig lets fn edit the config after the other options.
func WithConfig(fn func(*wal.Config)) Option { return func(o *options) { fn(&o.cfg) } }

// WithRegisterer registers the log's metrics on reg.
func WithRegisterer(reg prometheus.Registerer) Option {
	return func(o *options) { o.reg = reg }
}

// Open opens a log for tb (see the package documentation) and fails tb if it
// cannot. Its cleanup closes the log (ErrClosed is fine: the test may have
// closed it) and fails tb if bbolt's consistency check finds anything.
func Open(tb testing.TB, opts ...Option) *wal.Log {
	tb.Helper()
	o := options{cfg: wal.DefaultConfig()}
	o.cfg.Path = filepath.Join(tb.TempDir(), "wal.db")
	o.cfg.NoSync = true
	for _, opt := range opts {
		opt(&o)
	}
	l, err := wal.Open(o.cfg, Logger(tb), o.reg)
	if err != nil {
		tb.Fatalf("wal.Open(%+v) = %v", o.cfg, err)
	}
	tb.Cleanup(func() {
		if err := l.Close(); err != nil && !errors.Is(err, wal.ErrClosed) {
			tb.Errorf("Close() = %v", err)
		}
		Check(tb, o.cfg.Path)
	})
	return l
}

// Check opens the bbolt file at path read-only and fails tb with every error
// tx.Check reports. The file must not be open elsewhere in this process.
func Check(tb testing.TB, path string) {
	tb.Helper()
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		tb.Errorf("check %s: open: %v", path, err)
		return
	}
	defer func() {
		if cerr := db.Close(); cerr != nil {
			tb.Errorf("check %s: close: %v", path, cerr)
		}
	}()
	err = db.View(func(tx *bbolt.Tx) error {
		var errs []error
		for err := range tx.Check() {
			errs = append(errs, err)
		}
		return errors.Join(errs...)
	})
	if err != nil {
		tb.Errorf("check %s: bbolt consistency check failed:\n%v", path, err)
	}
}

// Logger returns a logger that writes through tb.Log.
func Logger(tb testing.TB) *slog.Logger {
	tb.Helper()
	return slog.New(slog.NewTextHandler(tbWriter{tb}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// tbWriter adapts testing.TB to io.Writer, as raft's testLoggerAdapter does.
type tbWriter struct{ tb testing.TB }

func (w tbWriter) Write(p []byte) (int, error) {
	w.tb.Helper()
	w.tb.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}
