package actors

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/prometheus/client_golang/prometheus"

	"gatehouse/actors/clock"
	"gatehouse/wal"
)

// Extension is a durable domain in the system's actor system, WAL and
// snapshots: the keys (actors/keys, listed first), the accounts, control
// and the agent gateway are ones. System drives its life the same way for
// each: Restore (from its snapshot section), Apply (each later WAL record
// it owns), Start (spawn its actors), Capture (at every snapshot), Stop;
// in cluster mode ApplyLive (LiveApplier) for other nodes' records and an
// OfflineImage for snapshots.
//
// The rules that make its state exactly as durable as the keys':
//   - Every domain owns disjoint record types, declared by Owns: type 1
//     (the snapshot barrier) is the engine's, 10..16 the keys', and each
//     extension claims its own (the accounts 2..4, the gateway and control
//     theirs from 64 up); two domains never claim the same type, and a
//     number once used is never reused (it is on disk).
//   - A change is validated by the owning actor, appended with Log.Append
//     (durable on return), applied, then answered; or appended with
//     AppendAsync whose done callback sends the commit notice to the owning
//     actor. Either way Capture, which is a message to those actors, sees
//     every record up to the snapshot's barrier.
//   - Apply must be deterministic, and replay must be exact: a section
//     captured at any moment after the snapshot's barrier N (Capture runs
//     while actors keep committing, so it may reflect records after N),
//     restored and followed by Apply of every record > N, must equal the
//     state that applied each record once. So Apply must be a no-op for a
//     record the section already reflects: full-state upserts and deletes
//     are by nature (replayed in order, they end where live did); a record
//     that adds to a state (a session turn, a run, a key's usage) must
//     carry a watermark, per entity or per part, saved in the section and
//     skipping seq <= watermark. A domain checks this rule with a test
//     that cuts a section at every point j >= k of a sequence holding
//     every record type it writes and replays from k: actorstest.Conformance
//     (the suite every extension runs) does it, and the keys'
//     TestPropertyRestoreEqualsLive.
type Extension interface {
	// Name is the extension's section name in snapshots; unique.
	Name() string
	// Owns reports whether records of type t are the extension's.
	Owns(t wal.Type) bool
	// Restore replaces the extension's state with a snapshot section (nil
	// when the snapshot has none or there is no snapshot). An error wrapping
	// ErrCorrupt sets the snapshot aside and an older one is tried.
	Restore(section []byte) error
	// Apply replays one record after the snapshot, before Start.
	Apply(seq uint64, rec wal.Record) error
	// Start spawns the extension's actors.
	Start(env ExtensionEnv) error
	// Capture returns the extension's section for a snapshot; it is called
	// after the snapshot's barrier record is durable.
	Capture(ctx context.Context) ([]byte, error)
	// Stop is called after the final snapshot, before the actor system stops.
	Stop()
}

// ExtensionEnv is what an extension gets to run its actors with.
type ExtensionEnv struct {
	Root   *actor.RootContext
	Log    EventLog
	Clock  clock.Clock
	Sealer *Sealer
	Logger *slog.Logger
	// Props builds actor props on gatehouse's pooled dispatcher.
	Props func(actor.Producer) *actor.Props
	// Watchdog's C returns a channel closed 1-2 AuthTimeouts from now, for
	// hot paths that should not arm a timer per request.
	Watchdog *Watchdog
	// Registerer takes the extension's metrics (nil: none registered).
	Registerer prometheus.Registerer
	// Lock takes a cluster-wide lock on name (EntityLocks) and returns its
	// unlock; on a single node, or before SetClusterLocks, it takes
	// nothing.
	Lock func(ctx context.Context, name string) (unlock func(), err error)
	// Locking reports whether Lock serializes across nodes (cluster mode,
	// once SetClusterLocks ran).
	Locking func() bool
	// Extensions are the system's extensions, for optional capabilities
	// one offers another (control's credentials, which the accounts
	// revoke: accounts.CredentialRevoker).
	Extensions []Extension
}

// SnapshotObserver is an optional Extension capability for state kept
// outside the WAL (the gateway's blob store): BeforeBarrier runs just
// before a snapshot's barrier record is appended, AfterSnapshot once the
// snapshot at index is durable and the WAL truncated below it. Both run on
// the snapshotting goroutine, one snapshot at a time, and must not block
// for long; AfterSnapshot's error is logged, the snapshot stands.
type SnapshotObserver interface {
	BeforeBarrier()
	AfterSnapshot(index uint64) error
}

// OfflineImager is an optional Extension capability that cluster mode's
// snapshots need: an image of the extension's state built off its actors,
// from a snapshot section and the records after it, exactly at a position
// of the log (the live actors may already reflect later records). Every
// extension of a cluster must have it, or no snapshot is taken.
type OfflineImager interface {
	// OfflineImage returns a fresh, empty image, independent of the
	// running extension (it may be called at any time after New).
	OfflineImage() OfflineImage
}

// OfflineImage is an extension's restore path on its own: Restore, Apply
// of each later record, then Section, which is the section Capture would
// return on a node that applied the same records (each domain checks it
// with a test).
type OfflineImage interface {
	Restore(section []byte) error
	Apply(seq uint64, rec wal.Record) error
	Section() ([]byte, error)
}

// Ticker is an optional Extension capability: System calls Tick every
// Config.FlushInterval (and when a test calls System.Tick), for sweeps and
// other periodic work. Tick must not block.
type Ticker interface {
	Tick(now time.Time)
}

// Flusher is an optional Extension capability for state an extension
// makes durable in batches (the keys' usage, the gateway's budget
// settlements): System calls Flush at Close, in the extensions' order,
// before the final snapshot, so a graceful stop loses nothing a crash
// would cost.
type Flusher interface {
	Flush(ctx context.Context) error
}

// extensionFor returns the extension owning t, or nil.
func (s *System) extensionFor(t wal.Type) Extension {
	if t == recBarrier {
		return nil
	}
	for _, x := range s.exts {
		if x.Owns(t) {
			return x
		}
	}
	return nil
}

func (s *System) extensionEnv() ExtensionEnv {
	return ExtensionEnv{
		Root: s.root, Log: s.elog, Clock: s.clock, Sealer: s.sealer, Logger: s.lg,
		Props:      func(p actor.Producer) *actor.Props { return actor.PropsFromProducer(p, actor.WithDispatcher(s.disp)) },
		Watchdog:   &s.watchdog,
		Registerer: s.reg,
		Lock:       s.lockEntity,
		Locking:    s.clusterLocked,
		Extensions: s.exts,
	}
}

// checkExtensions refuses two extensions with one name or one record
// type (the engine's barrier included).
func checkExtensions(exts []Extension) error {
	names := map[string]bool{}
	for i, x := range exts {
		if names[x.Name()] {
			return fmt.Errorf("actors: two extensions named %q", x.Name())
		}
		names[x.Name()] = true
		for t := range 256 {
			if !x.Owns(wal.Type(t)) {
				continue
			}
			if wal.Type(t) == recBarrier {
				return fmt.Errorf("actors: extension %s claims the barrier's record type", x.Name())
			}
			for _, y := range exts[:i] {
				if y.Owns(wal.Type(t)) {
					return fmt.Errorf("actors: extensions %s and %s both claim record type %d", y.Name(), x.Name(), t)
				}
			}
		}
	}
	return nil
}
