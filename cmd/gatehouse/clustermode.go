package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap/zapcore"

	"gatehouse/actors"
	"gatehouse/actors/cluster"
	"gatehouse/actors/cluster/transport"
	"gatehouse/actors/gateway"
	"gatehouse/actors/gateway/agentrun"
	"gatehouse/actors/gateway/blob"
	"gatehouse/actors/gateway/blob/replica"
	"gatehouse/httpapi"
	"gatehouse/wal/etcdlog"
)

// Cluster mode (cluster.etcd_endpoints set). What it opens, in this
// order, because protoactor's Remote.Start replaces grpc's global logger
// and races with grpc traffic already running (the etcd client's):
//
//  1. the transport of forwarded admissions, answering "not the owner"
//     until the actors exist (lateAdmitter), and of blob copies (refused
//     until the gateway opened its blob store: lateBlobs);
//  2. the etcd client;
//  3. the master key check against {prefix}/masterkey.id;
//  4. the replicated log, {prefix}/wal/ (beside the node's {prefix}/members/,
//     /shards/ and /data/);
//  5. the node, which the actors start through ClusterDeps.StartNode.
//
// It closes in reverse order after the actors.

// etcdDialTimeout bounds the etcd client's connection attempts.
const etcdDialTimeout = 5 * time.Second

// clusterRun is what cluster mode opened for one serve.
type clusterRun struct {
	cfg   clusterConfig
	lg    *slog.Logger
	admit lateAdmitter
	blobs lateBlobs
	tr    *transport.Transport
	tls   *transport.TLS // the transport's mutual TLS; nil: cluster.insecure
	cli   *clientv3.Client
	key   []byte                       // the master key, which authenticates the replicated log (checkMasterKey)
	node  atomic.Pointer[cluster.Node] // set once the actors joined
	locks *cluster.Locks               // keys' changes and sessions' turns, one at a time across the nodes
	once  sync.Once
	err   error      // close's
	fatal chan error // the actors cannot go on (ClusterDeps.Fatal): serve stops
}

// startCluster starts the transport, then the etcd client.
func startCluster(cfg clusterConfig, lg *slog.Logger) (*clusterRun, error) {
	c := &clusterRun{cfg: cfg, lg: lg.With("component", "cluster"), fatal: make(chan error, 1)}
	opts, tlsCfg, err := transportSecurity(cfg, c.lg)
	if err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	c.tls = tlsCfg
	tr, err := transport.Start(cfg.Listen, &c.admit, cfg.ForwardTimeout.d, lg, opts...)
	if err != nil {
		return nil, fmt.Errorf("cluster: %w; choose another with --cluster-listen or GATEHOUSE_CLUSTER_LISTEN", err)
	}
	c.tr = tr
	if err := verifyAdvertised(cfg, tlsCfg, tr.Addr()); err != nil {
		tr.Close()
		return nil, fmt.Errorf("cluster: %w", err)
	}
	if err := tr.Handle(replica.Service, c.blobs.serve); err != nil {
		tr.Close()
		return nil, fmt.Errorf("cluster: %w", err)
	}
	etcdTLS, err := etcdClientTLS(cfg.Etcd)
	if err != nil {
		tr.Close()
		return nil, fmt.Errorf("cluster: %w", err)
	}
	c.cli, err = clientv3.New(clientv3.Config{
		Endpoints:            cfg.EtcdEndpoints,
		TLS:                  etcdTLS,
		Username:             cfg.Etcd.Username,
		Password:             cfg.Etcd.Password,
		DialTimeout:          etcdDialTimeout,
		DialKeepAliveTime:    time.Second,
		DialKeepAliveTimeout: time.Second,
		Logger:               zapLogger(lg.With("component", "etcd-client"), zapcore.WarnLevel, nil),
	})
	if err != nil {
		tr.Close()
		if isEtcdAuthError(err) {
			return nil, fmt.Errorf("cluster: etcd at %s: %w: %w", c.endpoints(), errEtcdAuth, err)
		}
		if cfg.Etcd.tlsOn() && errors.Is(err, context.DeadlineExceeded) {
			what := "no TLS connection"
			if cfg.Etcd.Username != "" {
				what = "no TLS connection and login" // the login may be what took long: etcd checks the password with bcrypt
			}
			return nil, fmt.Errorf("cluster: etcd at %s: %s within %s: %w (is etcd reachable, does its certificate chain to "+
				"cluster.etcd.ca_file, and does it accept this node's client certificate, cluster.etcd.cert_file?)", c.endpoints(), what, etcdDialTimeout, err)
		}
		return nil, fmt.Errorf("cluster: etcd client for %s: %w", c.endpoints(), err)
	}
	c.lg.Info("cluster transport listening", "addr", tr.Addr(), "etcd", c.endpoints(), "tls", c.tls != nil)
	return c, nil
}

func (c *clusterRun) endpoints() string { return strings.Join(c.cfg.EtcdEndpoints, ",") }

// masterKeyIDKey is where the cluster's master key fingerprint lives.
func (c *clusterRun) masterKeyIDKey() string { return c.cfg.Prefix + "/masterkey.id" }

// errClusterKeyMismatch: the master key is not the one the cluster was
// started with.
var errClusterKeyMismatch = errors.New("master key does not match the cluster's")

// checkMasterKey records the master key's fingerprint (as master.key.id holds it) in
// etcd if none is there yet, else checks key against it: every node must
// open the others' records.
func (c *clusterRun) checkMasterKey(ctx context.Context, cfg fileConfig) error {
	key, err := loadMasterKey(cfg, slog.New(slog.DiscardHandler)) // explicit in cluster mode (validateCluster): never generated
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, c.cfg.RequestTimeout.d)
	defer cancel()
	k := c.masterKeyIDKey()
	resp, err := c.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(k), "=", 0)).
		Then(clientv3.OpPut(k, string(newFingerprint(key)))).
		Else(clientv3.OpGet(k)).Commit()
	if err != nil && isEtcdAuthError(err) {
		return fmt.Errorf("cluster: etcd at %s: read the master key fingerprint %s: %w: %w", c.endpoints(), k, errEtcdAuth, err)
	}
	if err != nil {
		return fmt.Errorf("cluster: etcd at %s: read the master key fingerprint %s: %w (is etcd running and reachable? cluster.request_timeout is %s)",
			c.endpoints(), k, err, c.cfg.RequestTimeout.d)
	}
	if resp.Succeeded {
		c.lg.Info("recorded the master key fingerprint in etcd", "key", k)
		c.key = key
		return nil
	}
	kvs := resp.Responses[0].GetResponseRange().Kvs
	if len(kvs) == 0 {
		return fmt.Errorf("cluster: etcd key %s vanished while read; start again", k)
	}
	if err := checkFingerprint(kvs[0].Value, key); err != nil {
		return fmt.Errorf("%w: the key from %s is not the key of the cluster under %s in etcd (%s: %w); "+
			"every node needs the same GATEHOUSE_MASTER_KEY (or master_key_file); nothing was changed",
			errClusterKeyMismatch, masterKeySource(cfg).desc, c.cfg.Prefix, k, err)
	}
	c.key = key
	return nil
}

// deps opens the replicated log under {prefix}/wal/ (written as the node
// id) and returns the actors' ClusterDeps: the node joins when the actors
// call StartNode, with ctx for its registration.
func (c *clusterRun) deps(ctx context.Context, reg prometheus.Registerer) (*actors.ClusterDeps, error) {
	if err := c.probeMembers(ctx); err != nil {
		return nil, err
	}
	if c.cfg.Etcd.AcceptUnauthenticated {
		c.lg.Warn("cluster.etcd.accept_unauthenticated is on: replicated-log entries and snapshots without a MAC apply, " +
			"so any client of etcd can write records every node applies; turn it off once a snapshot was taken after the upgrade (docs/decisions.md)")
	}
	l, err := etcdlog.Open(ctx, c.cli, c.cfg.Prefix+"/wal/", c.cfg.NodeID, c.cfg.RequestTimeout.d, etcdlog.Auth{
		MasterKey: c.key, AcceptUnauthenticated: c.cfg.Etcd.AcceptUnauthenticated, Logger: c.lg, Registerer: reg,
	})
	if err != nil {
		return nil, fmt.Errorf("cluster: open the replicated log at %s: %w", c.endpoints(), err)
	}
	return &actors.ClusterDeps{
		Log: l,
		StartNode: func(h cluster.Handler) (actors.ClusterNode, error) {
			n, err := cluster.Start(ctx, cluster.Config{
				Client: c.cli, Prefix: c.cfg.Prefix, NodeID: c.cfg.NodeID, Addr: c.tr.Addr(),
				TTL: c.cfg.LeaseTTL.d, RequestTimeout: c.cfg.RequestTimeout.d,
				Handler: h, Logger: c.lg, Metrics: reg,
			})
			if err != nil {
				return nil, fmt.Errorf("join the cluster at %s: %w", c.endpoints(), err)
			}
			if !c.node.CompareAndSwap(nil, n) {
				_ = n.Close()
				return nil, errors.New("join the cluster: this process joined already")
			}
			c.lg.Info("joined the cluster", "node_id", n.ID(), "addr", c.tr.Addr(), "members", len(n.Members()), "shards", n.Shards())
			return n, nil
		},
		Forward: c.tr.Forward,
		// Snapshots in etcd beside the log ({prefix}/wal/snap/, /snapshot),
		// their lock under a lease of the node's TTL.
		Snapshots: l.Snapshots(c.cfg.LeaseTTL.d),
		Fatal: func(err error) {
			select {
			case c.fatal <- err:
			default:
			}
		},
	}, nil
}

// wrapBlobs is the gateway's Config.WrapBlobs in cluster mode: the local
// blob store wrapped in package replica's, which keeps every upload on a
// second live member before it is acknowledged and fetches a blob missing
// here from the others. Its metrics go to reg.
func (c *clusterRun) wrapBlobs(reg prometheus.Registerer) func(*blob.Store) (gateway.BlobStore, error) {
	return func(local *blob.Store) (gateway.BlobStore, error) {
		st, err := replica.New(replica.Config{
			Local: local, NodeID: c.cfg.NodeID, Addr: c.tr.Addr(), Transport: c.tr,
			Members:     c.members,
			CallTimeout: c.cfg.RequestTimeout.d,
			Logger:      c.lg, Registerer: reg,
		})
		if err != nil {
			return nil, err
		}
		c.blobs.st.Store(st)
		return st, nil
	}
}

// members are the live members as the node last heard (none before it
// joined).
func (c *clusterRun) members() []replica.Member {
	n := c.Node()
	if n == nil {
		return nil
	}
	ms := n.Members()
	out := make([]replica.Member, len(ms))
	for i, m := range ms {
		out[i] = replica.Member{ID: m.ID, Addr: m.Addr}
	}
	return out
}

// lateBlobs answers other nodes' blob requests once the gateway opened its
// blob store; before, it refuses them (the asking node tries another).
type lateBlobs struct {
	st atomic.Pointer[replica.Store]
}

func (l *lateBlobs) serve(ctx context.Context, req []byte) ([]byte, error) {
	if st := l.st.Load(); st != nil {
		return st.Serve(ctx, req)
	}
	return nil, errors.New("blob store not open yet")
}

// failed receives the actors' fatal error in cluster mode (never
// on a single node: a nil channel).
func (c *clusterRun) failed() <-chan error {
	if c == nil {
		return nil
	}
	return c.fatal
}

// serveAdmissions routes forwarded admissions to sys once it exists.
func (c *clusterRun) serveAdmissions(sys any) {
	a, ok := sys.(transport.Admitter)
	if !ok {
		c.lg.Error("the actors do not admit forwarded requests (no AdmitOwned): other nodes' forwards are answered \"not the owner\"")
		return
	}
	c.admit.set(a)
}

// Node is the cluster node once the actors joined, else nil.
func (c *clusterRun) Node() *cluster.Node {
	if c == nil {
		return nil
	}
	return c.node.Load()
}

// close leaves the cluster (after the actors stopped), then stops the
// transport and the etcd client.
// It runs once; later calls return its error.
func (c *clusterRun) close() error {
	c.once.Do(func() {
		var errs []error
		if c.locks != nil {
			c.locks.Close()
		}
		if n := c.node.Load(); n != nil {
			errs = append(errs, n.Close())
		}
		c.tr.Close()
		errs = append(errs, c.cli.Close())
		c.err = errors.Join(errs...)
	})
	return c.err
}

// lateAdmitter is the transport's Admitter before the actors exist: it
// answers NotOwner (the forwarder looks the owner up again) until set.
type lateAdmitter struct {
	a atomic.Pointer[transport.Admitter]
}

func (l *lateAdmitter) set(a transport.Admitter) { l.a.Store(&a) }

// AdmitOwned admits through the actors once set.
func (l *lateAdmitter) AdmitOwned(ctx context.Context, keyID string) transport.Verdict {
	if a := l.a.Load(); a != nil {
		return (*a).AdmitOwned(ctx, keyID)
	}
	return transport.Verdict{Code: transport.NotOwner}
}

// clusterOpts are the httpapi options of cluster mode: /api/cluster and a
// /health that says whether the node is a member in good standing.
func (n *node) clusterOpts() []httpapi.Option {
	if node := n.cluster.Node(); node != nil {
		return []httpapi.Option{httpapi.WithCluster(node)}
	}
	return nil
}

// health is the gateway listener's /health: the actors', and in cluster
// mode whether this node holds its lease (a load balancer takes it out
// of rotation when not).
func (n *node) health() error {
	if err := n.sys.Health(); err != nil {
		return err
	}
	if node := n.cluster.Node(); node != nil && !node.Live() {
		return fmt.Errorf("%w: not a member of the cluster in good standing (no valid lease)", actors.ErrUnavailable)
	}
	return nil
}

// bootstrapAdmin runs ensure (the bootstrap admin's creation) on one node
// at a time, under the cluster's entity lock "bootstrap-admin": nodes
// started together on an empty cluster would each create the admin
// otherwise. The lock's next holder has applied what the previous one
// wrote, so a node after the first finds the admin and only warns about
// an ignored password. On a single node it is ensure.
func (c *clusterRun) bootstrapAdmin(ctx context.Context, ensure func() error) error {
	if c == nil {
		return ensure()
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	unlock, err := c.locks.Lock(ctx, "bootstrap-admin")
	if err != nil {
		return fmt.Errorf("cluster: bootstrap admin: %w", err)
	}
	defer unlock()
	return ensure()
}

// serializeChanges gives the actors and the gateway the cluster's entity
// locks, and returns the runtime's (its session turn lock, for
// app.Config.TurnLock): a key's changes, a gateway session's turns and
// the holds on a budget (docs/budgets.md) run one at a time
// across the nodes, each on a state that holds the ones before (nothing on
// a single node, where the entity's actor does it: nil).
func (c *clusterRun) serializeChanges(sys *actors.System, gw *gateway.Gateway) agentrun.TurnLock {
	if c == nil {
		return nil
	}
	c.locks = cluster.NewLocks(c.cli, c.cfg.Prefix, c.cfg.NodeID, c.cfg.LeaseTTL.d, sys.ClusterApplied, sys.ClusterWritten)
	sys.SetClusterLocks(c.locks)
	gw.SetBudgetLocker(c.locks)
	return c.locks.Sessions()
}

// watchMembers gives the gateway the cluster's live members, so that a
// summon whose node left and never came back fails on the others. A node
// that is not itself a member in good standing reports none: it decides
// nothing about the others.
func (c *clusterRun) watchMembers(gw *gateway.Gateway) {
	if c == nil {
		return
	}
	gw.SetMembers(func() []string {
		n := c.Node()
		if n == nil || !n.Live() {
			return nil
		}
		ms := n.Members()
		ids := make([]string, len(ms))
		for i, m := range ms {
			ids[i] = m.ID
		}
		return ids
	})
}
