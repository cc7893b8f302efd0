// Package etcdtest starts real etcd members inside a test process, on
// loopback, for the cluster tests: a 3-member cluster in a few hundred
// milliseconds, with members that can be killed and restarted.
package etcdtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
	"golang.org/x/crypto/bcrypt"
)

// Cluster is a set of embedded etcd members.
type Cluster struct {
	cfgs    []*embed.Config
	members []*embed.Etcd
}

// Start starts an n-member cluster and waits until it has a leader. The
// members stop when the test ends.
func Start(t testing.TB, n int, opts ...Option) *Cluster {
	t.Helper()
	c := StartShared(t, n, opts...)
	t.Cleanup(c.Close)
	return c
}

// StartShared is Start for a cluster that outlives the test starting it
// (shared by a package's tests): the caller closes it. Its data dirs are
// removed by Close. Ports are picked free and bound a moment later, by
// etcd: when another process took one meanwhile, the cluster is started
// again on new ones.
func StartShared(t testing.TB, n int, opts ...Option) *Cluster {
	t.Helper()
	for attempt := 1; ; attempt++ {
		c, err := tryStart(t, n, opts)
		if err == nil {
			return c
		}
		if !errors.Is(err, syscall.EADDRINUSE) || attempt == 3 {
			t.Fatal(err)
		}
		t.Logf("etcdtest: %v; starting again on other ports", err)
	}
}

// tryStart starts an n-member cluster on free ports; on an error every
// member is stopped and the data dirs removed.
func tryStart(t testing.TB, n int, opts []Option) (*Cluster, error) {
	c := &Cluster{cfgs: make([]*embed.Config, n), members: make([]*embed.Etcd, n)}
	peers := make([]string, n)
	for i := range n {
		cfg := embed.NewConfig()
		cfg.Name = fmt.Sprintf("m%d", i)
		dir, err := os.MkdirTemp("", "etcdtest-")
		if err != nil {
			c.Close()
			return nil, err
		}
		cfg.Dir = dir
		cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
		cfg.TickMs, cfg.ElectionMs = 50, 500
		cfg.UnsafeNoFsync = true // tests: the disk is not what is tested
		// Tests: a password check in microseconds, not the default cost's
		// 50-100 ms of a core (seconds on a loaded CI machine, past a
		// client's 5 s dial when it authenticates).
		cfg.BcryptCost = uint(bcrypt.MinCost)
		peer, client := freeURL(t), freeURL(t)
		cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{peer}, []url.URL{peer}
		cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{client}, []url.URL{client}
		cfg.InitialClusterToken = "gatehouse-test"
		for _, o := range opts {
			o(cfg)
		}
		peers[i] = cfg.Name + "=" + peer.String()
		c.cfgs[i] = cfg
	}
	for _, cfg := range c.cfgs {
		cfg.InitialCluster = strings.Join(peers, ",")
	}
	// A member that cannot start stops the others' wait for a quorum.
	abort := make(chan struct{})
	var once sync.Once
	errs := make(chan error, n)
	for i := range n {
		go func() {
			err := c.startOr(i, abort)
			if err != nil {
				once.Do(func() { close(abort) })
			}
			errs <- err
		}()
	}
	var failed error
	for range n {
		if err := <-errs; err != nil && (failed == nil || errors.Is(failed, errAborted)) {
			failed = err
		}
	}
	if failed != nil {
		c.Close()
		return nil, failed
	}
	return c, nil
}

// errAborted is a member's start given up because another member failed.
var errAborted = errors.New("etcdtest: start aborted: another member failed")

func (c *Cluster) start(i int) error { return c.startOr(i, nil) }

// startOr starts member i and waits until it is ready, or abort closes.
func (c *Cluster) startOr(i int, abort <-chan struct{}) error {
	e, err := embed.StartEtcd(c.cfgs[i])
	if err != nil {
		return fmt.Errorf("start etcd member %d: %w", i, err)
	}
	select {
	case <-e.Server.ReadyNotify():
	case <-abort:
		e.Close()
		return errAborted
	case <-time.After(20 * time.Second):
		e.Close()
		return fmt.Errorf("etcd member %d not ready after 20s", i)
	}
	c.members[i] = e
	return nil
}

// Option changes every member's configuration.
type Option func(*embed.Config)

// WithClientTLS serves the members' clients over TLS with certFile and
// keyFile, and requires a client certificate signed by a CA of caFile
// (etcd's --client-cert-auth): the endpoints are https URLs.
func WithClientTLS(certFile, keyFile, caFile string) Option {
	return func(cfg *embed.Config) {
		cfg.ClientTLSInfo.CertFile, cfg.ClientTLSInfo.KeyFile = certFile, keyFile
		cfg.ClientTLSInfo.TrustedCAFile, cfg.ClientTLSInfo.ClientCertAuth = caFile, true
		for _, us := range [][]url.URL{cfg.ListenClientUrls, cfg.AdvertiseClientUrls} {
			for i := range us {
				us[i].Scheme = "https"
			}
		}
	}
}

// Endpoint returns member i's client URL.
func (c *Cluster) Endpoint(i int) string { return c.cfgs[i].AdvertiseClientUrls[0].String() }

// Endpoints returns every member's client URL.
func (c *Cluster) Endpoints() []string {
	eps := make([]string, len(c.cfgs))
	for i := range c.cfgs {
		eps[i] = c.Endpoint(i)
	}
	return eps
}

// Client returns a client of the given endpoints (all when none), closed
// at the end of test t.
func (c *Cluster) Client(t testing.TB, endpoints ...string) *clientv3.Client {
	t.Helper()
	if len(endpoints) == 0 {
		endpoints = c.Endpoints()
	}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:            endpoints,
		DialTimeout:          2 * time.Second,
		DialKeepAliveTime:    time.Second,
		DialKeepAliveTimeout: time.Second,
		Logger:               zap.NewNop(),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// Leader returns the index of the current leader, or -1.
func (c *Cluster) Leader() int {
	for i, e := range c.members {
		if e != nil && e.Server.Leader() == e.Server.MemberID() {
			return i
		}
	}
	return -1
}

// Kill stops member i with embed.Etcd.Close, which is not a crash: a
// leader hands its role over first (the cluster is never without one),
// and Close waits up to the request timeout for open watch streams, so a
// kill takes 6–14 s. With an abrupt stop (Server.HardStop) an admission
// can fail during the election: docs/cluster.md, the caveat under the
// failure table.
func (c *Cluster) Kill(i int) {
	if e := c.members[i]; e != nil {
		e.Close()
		c.members[i] = nil
	}
}

// Restart starts a killed member i again from its data dir.
func (c *Cluster) Restart(t testing.TB, i int) {
	t.Helper()
	c.cfgs[i].ClusterState = embed.ClusterStateFlagExisting
	if err := c.start(i); err != nil {
		t.Fatal(err)
	}
}

// Close stops every member and removes the data dirs: the cluster is
// thrown away, so its members stop abruptly. embed.Etcd.Close alone is a
// graceful stop, and on a cluster stopping as a whole its leader hands its
// role over to a member that is stopping too, which waits out the request
// timeout (6 s with our ticks). So every member's raft stops first
// (Server.HardStop: no hand-over, the transport closed), in parallel, and
// only then are the members closed, also in parallel: about 1 s, etcd's
// grace for its peers' connections. A member's close still waits up to
// the request timeout for its open watch streams: close the clients
// first (those of Client are, when Start's cleanup closes the cluster).
func (c *Cluster) Close() {
	each := func(stop func(*embed.Etcd)) {
		var wg sync.WaitGroup
		for _, e := range c.members {
			if e != nil {
				wg.Go(func() { stop(e) })
			}
		}
		wg.Wait()
	}
	each(func(e *embed.Etcd) { e.Server.HardStop() })
	each((*embed.Etcd).Close)
	clear(c.members)
	for _, cfg := range c.cfgs {
		if cfg != nil && cfg.Dir != "" {
			os.RemoveAll(cfg.Dir)
		}
	}
}

// WaitLeader waits until the cluster has a leader.
func (c *Cluster) WaitLeader(ctx context.Context) int {
	for {
		if l := c.Leader(); l >= 0 {
			return l
		}
		select {
		case <-ctx.Done():
			return -1
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// freeURL returns an http URL on a loopback port that was free a moment
// ago.
func freeURL(t testing.TB) url.URL {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return url.URL{Scheme: "http", Host: addr}
}
