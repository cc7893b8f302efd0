// Package actorstest builds real actor systems for tests: a data dir in
// t.TempDir(), a WAL opened through wal/waltest (bbolt's consistency check
// runs after the test), a snapshot store, a fake clock and the extensions
// the test names. A Node can be crashed (as kill -9 would leave it),
// stopped cleanly and restarted on the same data dir.
//
//	n := actorstest.New(t, actorstest.WithExtensions(func() []actors.Extension {
//		gw, _ := gateway.New(gateway.DefaultConfig())
//		return []actors.Extension{gw}
//	}))
//	sys := n.Start()
//	... // use sys
//	sys = n.Restart() // crash, then restore from the snapshot and WAL
//
// Every call to Start builds fresh extensions (an Extension serves one
// System), the keys (actors/keys) and the accounts (actors/accounts)
// first: System carries them. Cleanups stop the system before its WAL closes. A Node is not
// safe for concurrent use; the System it returns is.
//
// Beside nodes: Conformance (conformance.go), the suite of the
// Extension rules every domain runs with a Domain value; and SharedLog
// (sharedlog.go), cluster mode's replicated log in one process, with the
// NodeLog each node appends through and the Follower that applies the
// other nodes' records live.
package actorstest

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/goleak"

	"gatehouse/actors"
	"gatehouse/actors/accounts"
	"gatehouse/actors/clock"
	"gatehouse/actors/keys"
	"gatehouse/snapshot"
	"gatehouse/wal"
	"gatehouse/wal/waltest"
)

// T0 is the fake clock's start: a fixed instant, so tests are repeatable.
var T0 = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)

// Node is one data dir that systems are started on, crashed and restarted.
type Node struct {
	tb testing.TB
	// Dir is the data dir (wal.db, snap/).
	Dir string
	// Clock drives the systems' time; advance it to expire things.
	Clock *clock.Fake
	// Config is used by every Start; New makes it test-friendly (8 shards,
	// no automatic flushes or snapshots: the test calls Tick and Snapshot).
	Config actors.Config
	// KeysConfig configures the keys every Start builds (New: 8 shards).
	KeysConfig keys.Config
	// AccountsConfig configures the accounts every Start builds.
	AccountsConfig accounts.Config
	// MasterKey seals secrets (32 bytes).
	MasterKey []byte
	// Extensions returns the extensions for one Start (nil: none).
	Extensions func() []actors.Extension
	// Logger receives the systems' logs (default: through tb.Log).
	Logger *slog.Logger
	// Sync turns fsync on in the WAL (off by default: tests are not crash
	// tests of the disk).
	Sync bool
	// RealClock makes Start use the wall clock instead of Clock: for
	// benchmarks set beside production paths, which read the real one.
	RealClock bool

	// Log and Sys are the running system's WAL and System (nil when down).
	Log *wal.Log
	Sys System
	// Exts are the running system's extensions, as Extensions returned them.
	Exts []actors.Extension
}

// System is a running system with its keys and accounts, as tests drive
// them: the engine's methods (Tick, Snapshot, Close), the keys' (Authorize,
// CreateKey, ...) and the accounts' (users, sessions) on one value.
type System struct {
	*actors.System
	*accounts.Service
	*Keys
}

// Keys is the embedded keys' type (its field is System.Keys).
type Keys = keys.Service

// Tick is the engine's (the accounts' Tick is the engine's to call).
func (s System) Tick() { s.System.Tick() }

// Option configures a Node.
type Option func(*Node)

// WithExtensions makes every Start use fn's extensions.
func WithExtensions(fn func() []actors.Extension) Option {
	return func(n *Node) { n.Extensions = fn }
}

// WithKeys lets fn edit the keys.Config after New's defaults.
func WithKeys(fn func(*keys.Config)) Option { return func(n *Node) { fn(&n.KeysConfig) } }

// WithConfig lets fn edit the actors.Config after New's defaults.
func WithConfig(fn func(*actors.Config)) Option { return func(n *Node) { fn(&n.Config) } }

// WithAccounts lets fn edit the accounts.Config after New's defaults.
func WithAccounts(fn func(*accounts.Config)) Option {
	return func(n *Node) { fn(&n.AccountsConfig) }
}

// WithClock uses clk instead of a new fake clock at T0.
func WithClock(clk *clock.Fake) Option { return func(n *Node) { n.Clock = clk } }

// WithDir uses dir as the data dir instead of a new temp dir.
func WithDir(dir string) Option { return func(n *Node) { n.Dir = dir } }

// New returns a Node on a fresh temp dir; nothing runs until Start.
func New(tb testing.TB, opts ...Option) *Node {
	tb.Helper()
	cfg := actors.DefaultConfig()
	kcfg := keys.DefaultConfig()
	kcfg.Shards = 8
	cfg.FlushInterval = time.Hour // tests drive Tick themselves
	cfg.SnapshotEvery, cfg.SnapshotInterval = 0, 0
	n := &Node{tb: tb, Dir: tb.TempDir(), Clock: clock.NewFake(T0), Config: cfg, KeysConfig: kcfg, AccountsConfig: accounts.DefaultConfig(), MasterKey: make([]byte, 32)}
	for _, o := range opts {
		o(n)
	}
	if n.Logger == nil {
		n.Logger = waltest.Logger(tb)
	}
	return n
}

// Start opens the WAL and snapshot store and restores a System from them.
// It fails tb if anything does not open.
func (n *Node) Start() System {
	n.tb.Helper()
	if n.Sys.System != nil {
		n.tb.Fatalf("actorstest: Start while a system is running")
	}
	wopts := []waltest.Option{waltest.WithPath(filepath.Join(n.Dir, "wal.db"))}
	if n.Sync {
		wopts = append(wopts, waltest.WithSync())
	}
	l := waltest.Open(n.tb, wopts...)
	snaps, err := snapshot.New(snapshot.Config{Dir: filepath.Join(n.Dir, "snap"), Retain: 2}, n.Logger, nil)
	if err != nil {
		n.tb.Fatalf("snapshot.New: %v", err)
	}
	sealer, err := actors.NewSealer(n.MasterKey)
	if err != nil {
		n.tb.Fatalf("NewSealer: %v", err)
	}
	ks, err := keys.New(n.KeysConfig)
	if err != nil {
		n.tb.Fatalf("keys.New: %v", err)
	}
	acc, err := accounts.New(n.AccountsConfig)
	if err != nil {
		n.tb.Fatalf("accounts.New: %v", err)
	}
	var exts []actors.Extension
	if n.Extensions != nil {
		exts = n.Extensions()
	}
	var clk clock.Clock = n.Clock
	if n.RealClock {
		clk = clock.Real{}
	}
	sys, err := actors.New(n.Config, actors.Deps{
		Log: l, Snapshots: snaps, Clock: clk, Sealer: sealer, Logger: n.Logger,
	}, append([]actors.Extension{ks, acc}, exts...)...)
	if err != nil {
		_ = l.Close()
		n.tb.Fatalf("actors.New: %v", err)
	}
	n.Log, n.Sys, n.Exts = l, System{sys, acc, ks}, exts
	// Registered after waltest's cleanup, so it runs first: the system
	// stops before its WAL closes and is checked.
	n.tb.Cleanup(func() {
		if n.Sys.System == sys {
			n.Crash()
		}
	})
	return n.Sys
}

// Crash stops the running system as kill -9 would (no flush, no final
// snapshot) and closes its WAL.
func (n *Node) Crash() {
	if n.Sys.System == nil {
		return
	}
	n.Sys.Abort()
	_ = n.Log.Close()
	n.Sys, n.Log, n.Exts = System{}, nil, nil
}

// Stop shuts the running system down cleanly (usage flushed, a final
// snapshot taken) and closes its WAL; it fails tb on error.
func (n *Node) Stop() {
	n.tb.Helper()
	if n.Sys.System == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := n.Sys.Close(ctx)
	_ = n.Log.Close()
	n.Sys, n.Log, n.Exts = System{}, nil, nil
	if err != nil {
		n.tb.Fatalf("System.Close: %v", err)
	}
}

// Restart crashes the running system and starts a new one on the same dir.
func (n *Node) Restart() System {
	n.tb.Helper()
	n.Crash()
	return n.Start()
}

// Ctx returns a context that ends after 10 s or with the test.
func Ctx(tb testing.TB) context.Context {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	tb.Cleanup(cancel)
	return ctx
}

// CopyDir copies the files under from into to (created as needed; files
// in it must not exist yet), for tests that restore a copy of a data dir:
// a fixture, or a running node's dir while nothing writes to it. It fails
// tb on any error.
func CopyDir(tb testing.TB, from, to string) {
	tb.Helper()
	if err := os.CopyFS(to, os.DirFS(from)); err != nil {
		tb.Fatalf("copy %s to %s: %v", from, to, err)
	}
}

// VerifyTestMain runs m and then fails the package if goroutines are
// left, as goleak.VerifyTestMain does, but gives them up to 3 s to end
// first: protoactor's dead-letter throttle leaves a goroutine that ends by
// itself one period (1 s) after a dead letter, longer than goleak waits.
func VerifyTestMain(m *testing.M) {
	code := m.Run()
	if code == 0 {
		err := goleak.Find()
		for deadline := time.Now().Add(3 * time.Second); err != nil && time.Now().Before(deadline); err = goleak.Find() {
			time.Sleep(100 * time.Millisecond)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "goleak: errors on successful test run: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}
