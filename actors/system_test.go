package actors

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"gatehouse/actors/clock"
	"gatehouse/snapshot"
	"gatehouse/wal"
	"gatehouse/wal/waltest"
)

var t0 = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)

// env is one data dir that systems can be started on, crashed and restarted.
type env struct {
	tb    testing.TB
	dir   string
	clk   *clock.Fake
	cfg   Config
	key   []byte
	log   *wal.Log
	sys   *System
	lg    *slog.Logger
	snaps *snapshot.Store
	exts  []Extension
}

func newEnv(tb testing.TB) *env {
	tb.Helper()
	cfg := DefaultConfig()
	cfg.Shards = 8
	cfg.FlushInterval = time.Hour // tests drive Tick themselves
	cfg.SnapshotEvery, cfg.SnapshotInterval = 0, 0
	e := &env{tb: tb, dir: tb.TempDir(), clk: clock.NewFake(t0), cfg: cfg, key: make([]byte, 32)}
	e.lg = slog.New(slog.NewTextHandler(io.Discard, nil))
	if os.Getenv("GATEHOUSE_TEST_LOG") != "" {
		e.lg = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	tb.Cleanup(func() { e.crash() })
	return e
}

// start opens the WAL and snapshot store and restores a System from them.
func (e *env) start() *System {
	e.tb.Helper()
	// Through waltest, so bbolt's consistency check runs after the test.
	l := waltest.Open(e.tb, waltest.WithPath(filepath.Join(e.dir, "wal.db")))
	snaps, err := snapshot.New(snapshot.Config{Dir: filepath.Join(e.dir, "snap"), Retain: 2}, e.lg, nil)
	if err != nil {
		e.tb.Fatalf("snapshot.New: %v", err)
	}
	sealer, err := NewSealer(e.key)
	if err != nil {
		e.tb.Fatal(err)
	}
	sys, err := New(e.cfg, Deps{Log: l, Snapshots: snaps, Clock: e.clk, Sealer: sealer, Logger: e.lg, Extensions: e.exts})
	if err != nil {
		e.tb.Fatalf("New: %v", err)
	}
	e.log, e.sys, e.snaps = l, sys, snaps
	// After waltest's cleanup, so it runs first: stop before the WAL closes.
	e.tb.Cleanup(func() {
		if e.sys == sys {
			e.crash()
		}
	})
	return sys
}

// crash stops the actors without flushing or snapshotting, as kill -9 would.
func (e *env) crash() {
	if e.sys == nil {
		return
	}
	e.sys.Abort()
	_ = e.log.Close()
	e.sys = nil
}

// stop shuts down cleanly.
func (e *env) stop() {
	e.tb.Helper()
	if err := e.sys.Close(ctx(e.tb)); err != nil {
		e.tb.Fatalf("Close: %v", err)
	}
	_ = e.log.Close()
	e.sys = nil
}

func ctx(tb testing.TB) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	tb.Cleanup(cancel)
	return c
}

func mustUser(tb testing.TB, s *System, email string, plan Plan, licensed bool) User {
	tb.Helper()
	u, err := s.CreateUser(ctx(tb), NewUser{Email: email, Password: "correct horse", Plan: plan, LicenseActive: licensed})
	if err != nil {
		tb.Fatalf("CreateUser(%s): %v", email, err)
	}
	return u
}

func mustKey(tb testing.TB, s *System, owner User, name string) (KeyInfo, string) {
	tb.Helper()
	k, secret, err := s.CreateKey(ctx(tb), NewKey{Owner: owner, Name: name})
	if err != nil {
		tb.Fatalf("CreateKey: %v", err)
	}
	return k, secret
}

func setLimit(tb testing.TB, s *System, k KeyInfo, n int64) {
	tb.Helper()
	if _, err := s.UpdateKey(ctx(tb), k.ID, KeyPatch{RateLimit: &n}); err != nil {
		tb.Fatalf("UpdateKey: %v", err)
	}
}

func authN(tb testing.TB, s *System, secret string, n int) (ok int) {
	tb.Helper()
	for range n {
		r := s.Authorize(ctx(tb), []byte(secret))
		switch {
		case r.Err == nil:
			ok++
		case errors.Is(r.Err, ErrRateLimited):
		default:
			tb.Fatalf("Authorize: %v", r.Err)
		}
	}
	return ok
}

func usageOf(tb testing.TB, s *System, k KeyInfo) Usage {
	tb.Helper()
	u, err := s.KeyUsage(ctx(tb), k.ID, 7)
	if err != nil {
		tb.Fatalf("KeyUsage: %v", err)
	}
	return u
}
