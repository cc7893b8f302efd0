package cluster

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Defaults of Config.
const (
	DefaultPrefix         = "/gatehouse"
	DefaultTTL            = 3 * time.Second
	DefaultShards         = 256
	DefaultRequestTimeout = time.Second
	// maxOpsPerTxn bounds a commit transaction (etcd's default limit is 128).
	maxOpsPerTxn = 128
)

// Config configures a Node.
type Config struct {
	// Client is the etcd client; the Node does not close it.
	Client *clientv3.Client
	// Prefix is the key prefix of everything the cluster keeps in etcd.
	Prefix string
	// NodeID names the node; unique in the cluster.
	NodeID string
	// Addr is where the other nodes reach this one.
	Addr string
	// TTL is the lease TTL: a dead node's shards move after about TTL.
	TTL time.Duration
	// Shards is the number of virtual shards; every node must agree.
	Shards int
	// RequestTimeout bounds each etcd request.
	RequestTimeout time.Duration
	// Handler hears about shards acquired and released; may be nil.
	Handler Handler
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// Metrics registers the node's metrics when not nil.
	Metrics prometheus.Registerer
}

// Handler is told about ownership changes. Its methods are called from the
// node's reconcile loop, one at a time, and should return promptly.
type Handler interface {
	// Acquired: the node owns shard at epoch from now on.
	Acquired(shard int, epoch int64)
	// Released: the node no longer owns shard. graceful reports a
	// release the node chose (the shard is still owned at epoch while
	// Released runs, so the handler may Commit its last records); on a
	// lost lease it is false and the epoch is already void.
	Released(shard int, epoch int64, graceful bool)
}

// ErrConfig reports an invalid Config.
var ErrConfig = errors.New("cluster: invalid config")

func (c Config) withDefaults() (Config, error) {
	if c.Client == nil {
		return c, fmt.Errorf("%w: no etcd client", ErrConfig)
	}
	if c.NodeID == "" {
		return c, fmt.Errorf("%w: node id is empty", ErrConfig)
	}
	if c.Prefix == "" {
		c.Prefix = DefaultPrefix
	}
	if c.TTL == 0 {
		c.TTL = DefaultTTL
	}
	if c.TTL < time.Second {
		return c, fmt.Errorf("%w: lease TTL %v is below 1s", ErrConfig, c.TTL)
	}
	if c.Shards == 0 {
		c.Shards = DefaultShards
	}
	if c.Shards < 1 || c.Shards > 4096 {
		return c, fmt.Errorf("%w: %d shards (1..4096)", ErrConfig, c.Shards)
	}
	if c.RequestTimeout == 0 {
		c.RequestTimeout = DefaultRequestTimeout
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c, nil
}
