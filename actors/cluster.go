package actors

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"gatehouse/actors/cluster"
	"gatehouse/actors/cluster/transport"
	"gatehouse/wal"
	"gatehouse/wal/etcdlog"
)

// ClusterDeps turn cluster mode on (Deps.Cluster; nil: a single node on
// bbolt). The durable state then lives in a log replicated by etcd, which
// every node follows and applies; only the owner of a key's shard admits
// its requests, from quota it reserved in etcd; the others forward.
type ClusterDeps struct {
	// Log is the replicated log (a *etcdlog.Log): an Append is durable on
	// a majority of etcd when it returns. It replaces Deps.Log and
	// Deps.Snapshots, which may be nil in cluster mode.
	Log ReplicatedLog
	// StartNode joins the cluster once the actors run, with the handler
	// that hears about the shards this node acquires and releases (a
	// closure over cluster.Start that sets Config.Handler).
	StartNode func(h cluster.Handler) (ClusterNode, error)
	// Forward asks the node at addr to admit one request for id (a key's; a
	// *transport.Transport's Forward).
	Forward func(ctx context.Context, addr, id string, reqID uint64) (transport.Verdict, error)
	// Snapshots is the snapshot store beside the log (Log's own,
	// (*etcdlog.Log).Snapshots): a node restores from its latest snapshot
	// and the log after it, and one node at a time takes snapshots
	// (Config.SnapshotEvery, Config.SnapshotInterval) and truncates the
	// log. Nil: no snapshots, the whole log is kept and replayed.
	Snapshots *etcdlog.Snapshots
	// Fatal, if set, is called (once, and must not block) when the node
	// cannot go on: its follower fell behind the log's truncation. The
	// process should stop; started again, it restores from the snapshot.
	Fatal func(error)
}

// ReplicatedLog is the log cluster mode keeps in etcd (wal/etcdlog).
type ReplicatedLog interface {
	// Append writes recs as one batch and returns the sequence number of
	// the last; durable when it returns without error.
	Append(ctx context.Context, recs ...wal.Record) (last uint64, err error)
	// Replay calls fn for every record after seq after that the log holds
	// now, in order, with the id of the node that wrote it, and returns the
	// position to Follow from.
	Replay(ctx context.Context, after uint64, fn func(seq uint64, writer string, rec wal.Record) error) (upTo uint64, err error)
	// Follow calls fn for every record after seq after, in log order,
	// with the id of the node that wrote it, until ctx ends or fn fails.
	Follow(ctx context.Context, after uint64, fn func(seq uint64, writer string, rec wal.Record) error) error
}

// ClusterNode is what System needs of a *cluster.Node.
type ClusterNode interface {
	ID() string
	Shards() int
	ShardOf(id string) int
	Owns(shard int) (epoch int64, ok bool)
	Owner(shard int) (node, addr string, epoch int64, ok bool)
	Live() bool
	Commit(ctx context.Context, shard int, epoch int64, puts ...cluster.Put) error
	Load(ctx context.Context, shard int) (map[string][]byte, error)
	Close() error
}

var _ ClusterNode = (*cluster.Node)(nil)

// LiveApplier is an optional Extension capability for cluster mode: apply
// a record another node wrote, while the extension's actors run. It is
// called from one goroutine, in log order, only after Start; it must route
// the record to the actor owning that part of the state, which applies it
// with the same function replay uses (so the replay rule holds as is), and
// return once the actor has applied it (or ctx ends). An extension without
// it is not shared across nodes: its records are durable in the
// replicated log but other nodes see them only after a restart.
type LiveApplier interface {
	ApplyLive(ctx context.Context, seq uint64, rec wal.Record) error
}

// OwnApplier is an optional LiveApplier capability: records of the types
// it names are applied in log order by every node, the writer included
// (ApplyLive is called for this node's own records of those types too),
// instead of by the writer's actors when their append is acknowledged.
// It is for a record whose effect is decided at apply, from the records
// before it (the gateway's budget holds: a hold decided on a ledger that
// missed a hold before it in the log is void on every node).
type OwnApplier interface {
	AppliesOwn(t wal.Type) bool
}

// EntityLocks serialize the changes to one entity across the nodes of a
// cluster (a *cluster.Locks): Lock waits until this node holds name and
// has applied every change its previous holder made; unlock releases it.
type EntityLocks interface {
	Lock(ctx context.Context, name string) (unlock func(), err error)
}

// clusterMode is System's part of cluster mode (nil: a single node).
type clusterMode struct {
	deps *ClusterDeps
	rlog *etcdlog.Writer
	// node is set once StartNode returns, and nodeSet closed then (also
	// when it failed, node staying nil). The node's loops may call the
	// handler before that: a handler needing node waits on nodeSet.
	node    ClusterNode
	nodeSet chan struct{}
	applied atomic.Uint64 // the last record of the replicated log applied here
	cancel  context.CancelFunc
	done    chan struct{} // the follower ended
	locks   atomic.Pointer[EntityLocks]
	// snapPos is the position of the latest snapshot in etcd this node
	// knows of, sinceSnap how many records it followed since (snapshotcluster.go).
	snapPos   atomic.Uint64
	sinceSnap atomic.Uint64
	// fatal is set once the node cannot follow the log any more.
	fatal atomic.Pointer[error]
}

// Timings of cluster mode.
const (
	clusterTimeout = 3 * time.Second        // one etcd request
	followBackoff  = 200 * time.Millisecond // the first pause after the follower fails
	maxFollowPause = 2 * time.Second
)

func newClusterMode(d *ClusterDeps, lg *slog.Logger) (*clusterMode, error) {
	if d.Log == nil || d.StartNode == nil || d.Forward == nil {
		return nil, errors.New("actors: cluster mode needs Log, StartNode and Forward")
	}
	return &clusterMode{deps: d, rlog: etcdlog.NewWriter(d.Log, clusterTimeout, ErrUnavailable), done: make(chan struct{}), nodeSet: make(chan struct{})}, nil
}

// waitNode returns the node once StartNode returned, waiting at most d
// (d < 0: until then; nil: it failed, or took longer). A graceful release
// waits bounded: the node may be closed inside StartNode, by the caller,
// before it returns.
func (cm *clusterMode) waitNode(d time.Duration) ClusterNode {
	if d < 0 {
		<-cm.nodeSet
		return cm.node
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-cm.nodeSet:
		return cm.node
	case <-t.C:
		return nil
	}
}

// startCluster joins the cluster once the actors run, and starts following
// the replicated log from upTo.
func (s *System) startCluster(upTo uint64) error {
	cm := s.cm
	env := ClusterEnv{WaitNode: cm.waitNode, Forward: cm.deps.Forward, Closed: s.closed.Load}
	var members clusterMembers
	for _, x := range s.exts {
		if m, ok := x.(ClusterMember); ok {
			m.JoinCluster(env)
			members = append(members, m)
		}
	}
	node, err := cm.deps.StartNode(members)
	if err != nil {
		close(cm.nodeSet)
		return fmt.Errorf("join the cluster: %w", err)
	}
	cm.node = node
	for _, m := range members {
		m.NodeStarted(node)
	}
	close(cm.nodeSet)
	cm.applied.Store(upTo)
	ctx, cancel := context.WithCancel(context.Background())
	cm.cancel = cancel
	go s.follow(ctx, upTo)
	return nil
}

// stopCluster leaves the cluster: settles the shards this node owns (so the
// successors lose nothing), stops following and stops the log writer.
func (s *System) stopCluster() error {
	cm := s.cm
	var err error
	if cm.node != nil {
		err = cm.node.Close()
	}
	if cm.cancel != nil {
		cm.cancel()
		<-cm.done
	}
	cm.rlog.Close()
	return err
}

// abortCluster leaves the cluster and stops following and writing; the
// usage not yet flushed is lost, as on a kill -9.
func (s *System) abortCluster() {
	cm := s.cm
	if cm.node != nil {
		_ = cm.node.Close()
	}
	if cm.cancel != nil {
		cm.cancel()
		<-cm.done
	}
	cm.rlog.Close()
}

// ClusterApplied returns the position of the last record of the
// replicated log this node has applied (0 in single-node mode).
func (s *System) ClusterApplied() uint64 {
	if s.cm == nil {
		return 0
	}
	return s.cm.applied.Load()
}

// ClusterWritten returns the position of the last record this node wrote
// to the replicated log and had acknowledged (0 in single-node mode):
// another node that has applied up to it has seen every change this node
// acknowledged so far.
func (s *System) ClusterWritten() uint64 {
	if s.cm == nil {
		return 0
	}
	return s.cm.rlog.Written()
}

// SetClusterLocks serializes each key's changes across the nodes (cluster
// mode; call it once New returned, before serving): a change is decided
// on a state that holds every earlier change, wherever it was made, so
// every node applies a key's changes in one order. Without it two nodes
// changing a key at the same moment may end up disagreeing.
func (s *System) SetClusterLocks(l EntityLocks) {
	if s.cm != nil {
		s.cm.locks.Store(&l)
	}
}

// ClusterMember is an optional Extension capability for cluster mode: a
// domain that owns work by the cluster's shards (the keys: a key's
// admissions are made by the owner of its shard, which holds its quota).
// The node tells it which shards this node acquires and releases
// (cluster.Handler; Acquired may come before NodeStarted: the node's
// loops run while StartNode joins).
type ClusterMember interface {
	cluster.Handler
	// JoinCluster is called once the actors run, before the node starts,
	// with what the member may use of cluster mode for the system's life.
	JoinCluster(env ClusterEnv)
	// NodeStarted is called once StartNode returned the node.
	NodeStarted(node ClusterNode)
}

// ClusterEnv is what a ClusterMember gets of cluster mode.
type ClusterEnv struct {
	// WaitNode returns the node once StartNode returned, waiting at most d
	// (d < 0: until then); nil when it failed or took longer.
	WaitNode func(d time.Duration) ClusterNode
	// Forward asks the node at addr to act for id (ClusterDeps.Forward).
	Forward func(ctx context.Context, addr, id string, reqID uint64) (transport.Verdict, error)
	// Closed reports whether the system is closing.
	Closed func() bool
}

// clusterMembers hands the node's ownership changes to every member.
type clusterMembers []ClusterMember

func (ms clusterMembers) Acquired(shard int, epoch int64) {
	for _, m := range ms {
		m.Acquired(shard, epoch)
	}
}

func (ms clusterMembers) Released(shard int, epoch int64, graceful bool) {
	for _, m := range ms {
		m.Released(shard, epoch, graceful)
	}
}

// lockEntity takes the cluster-wide lock name (see EntityLocks): while it
// is held, this node's state holds every change made under name before,
// on any node. Nothing on a single node, or before SetClusterLocks.
func (s *System) lockEntity(ctx context.Context, name string) (func(), error) {
	if !s.clusterLocked() {
		return func() {}, nil
	}
	unlock, err := (*s.cm.locks.Load()).Lock(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("%s: %w: %w", name, ErrUnavailable, err)
	}
	return unlock, nil
}

// clusterLocked reports whether changes are serialized across nodes
// (ExtensionEnv.Locking).
func (s *System) clusterLocked() bool { return s.cm != nil && s.cm.locks.Load() != nil }

// Every node follows the replicated log and applies what the other nodes
// wrote, through the same transitions replay uses, each in the actor that
// owns that part of the state: key events in the key's shard (or its live
// key actor), an extension's records (the accounts' among them) through
// its LiveApplier. A node's own records were applied by its actors
// when their append was acknowledged, and are skipped (except those an
// OwnApplier applies in log order).
//
// Records reach a node once each and in log order, so the follower applies
// them without the replay watermarks (which guard a snapshot's overlap with
// the log; cluster mode's snapshots are exact at their position, and a
// node follows from there): a record another node
// wrote before one of this node's own that was applied already still
// counts (a key's usage flushed by its previous owner, say).

// follow applies the replicated log from after until ctx ends, resuming
// after a failure (etcd out of reach, a leader change) where it stopped.
func (s *System) follow(ctx context.Context, after uint64) {
	cm := s.cm
	defer close(cm.done)
	self := cm.node.ID()
	pause := followBackoff
	for ctx.Err() == nil {
		err := cm.deps.Log.Follow(ctx, after, func(seq uint64, writer string, r wal.Record) error {
			if writer != self || s.appliesOwn(r.Type) {
				if err := s.applyForeign(ctx, seq, r); err != nil {
					return err
				}
				s.m.applied.Inc()
			}
			after = seq
			cm.applied.Store(seq)
			cm.sinceSnap.Add(1)
			pause = followBackoff
			return nil
		})
		if ctx.Err() != nil {
			return
		}
		s.m.followErrors.Inc()
		if errors.Is(err, etcdlog.ErrCompacted) {
			// The records after this node's position are gone: truncated
			// below a snapshot it is more than one snapshot behind.
			s.failCluster(fmt.Errorf("following the replicated log after %d: %w", after, err))
			return
		}
		s.lg.Warn("cluster: following the replicated log", "after", after, "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(pause):
		}
		pause = min(2*pause, maxFollowPause)
	}
}

// appliesOwn reports whether this node's own records of type t are
// applied by the follower, in log order (OwnApplier).
func (s *System) appliesOwn(t wal.Type) bool {
	oa, ok := s.extensionFor(t).(OwnApplier)
	return ok && oa.AppliesOwn(t)
}

// applyForeign applies one record another node wrote (or one of this
// node's that its extension applies in log order: OwnApplier), through
// the LiveApplier of the domain that owns it (the keys' included).
func (s *System) applyForeign(ctx context.Context, seq uint64, r wal.Record) error {
	if r.Type == recBarrier {
		return nil
	}
	if la, ok := s.extensionFor(r.Type).(LiveApplier); ok {
		return la.ApplyLive(ctx, seq, r)
	}
	return nil
}
