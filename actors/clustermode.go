package actors

import (
	"context"

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
	// Forward asks the node at addr to admit one request for keyID (a
	// *transport.Transport's Forward).
	Forward func(ctx context.Context, addr, keyID string, reqID uint64) (transport.Verdict, error)
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
