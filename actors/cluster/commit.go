package cluster

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Put is one value a shard's owner keeps in etcd, under the shard's data
// prefix. A nil Value deletes the name.
type Put struct {
	Name  string
	Value []byte
}

type commitReq struct {
	shard int
	epoch int64
	puts  []Put
	done  chan error
}

// Commit writes puts for shard, fenced on epoch: it fails with ErrNotOwner
// when the shard is no longer owned at epoch, and writes nothing then.
// Concurrent commits are batched (group commit, at most 128 operations a
// transaction). An error other than ErrNotOwner leaves the outcome unknown:
// the caller must treat the values as possibly written.
func (n *Node) Commit(ctx context.Context, shard int, epoch int64, puts ...Put) error {
	if len(puts) > maxOpsPerTxn {
		return fmt.Errorf("cluster: commit of %d values (at most %d)", len(puts), maxOpsPerTxn)
	}
	req := &commitReq{shard: shard, epoch: epoch, puts: puts, done: make(chan error, 1)}
	select {
	case n.commits <- req:
	case <-n.stopped:
		return ErrStopped
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-req.done:
		return err
	case <-n.stopped:
		return ErrStopped
	case <-ctx.Done():
		return ctx.Err()
	}
}

// commitLoop takes the commits waiting, groups them by shard and epoch and
// runs one fenced transaction per group in parallel.
func (n *Node) commitLoop(ctx context.Context) {
	defer n.wg.Done()
	for {
		var first *commitReq
		select {
		case <-ctx.Done():
			n.failPending()
			return
		case first = <-n.commits:
		}
		batch := []*commitReq{first}
	drain:
		for len(batch) < 4*maxOpsPerTxn {
			select {
			case r := <-n.commits:
				batch = append(batch, r)
			default:
				break drain
			}
		}
		type group struct {
			shard int
			epoch int64
		}
		groups := map[group][]*commitReq{}
		for _, r := range batch {
			g := group{r.shard, r.epoch}
			groups[g] = append(groups[g], r)
		}
		var wg sync.WaitGroup
		for g, reqs := range groups {
			for len(reqs) > 0 {
				var txn []*commitReq
				ops := 0
				for len(reqs) > 0 && ops+len(reqs[0].puts) <= maxOpsPerTxn {
					ops += len(reqs[0].puts)
					txn, reqs = append(txn, reqs[0]), reqs[1:]
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					err := n.commitTxn(ctx, g.shard, g.epoch, txn)
					for _, r := range txn {
						r.done <- err
					}
				}()
			}
		}
		wg.Wait()
	}
}

func (n *Node) failPending() {
	for {
		select {
		case r := <-n.commits:
			r.done <- ErrStopped
		default:
			return
		}
	}
}

func (n *Node) commitTxn(ctx context.Context, shard int, epoch int64, reqs []*commitReq) error {
	var ops []clientv3.Op
	prefix := n.dataPrefix(shard)
	for _, r := range reqs {
		for _, p := range r.puts {
			if p.Value == nil {
				ops = append(ops, clientv3.OpDelete(prefix+p.Name))
			} else {
				ops = append(ops, clientv3.OpPut(prefix+p.Name, string(p.Value)))
			}
		}
	}
	ctx, cancel := context.WithTimeout(ctx, n.cfg.RequestTimeout)
	defer cancel()
	start := time.Now()
	var resp *clientv3.TxnResponse
	var err error
	for attempt := 0; ; attempt++ {
		// The first attempt gets a quarter of the budget: one sent to a
		// member that is being stopped (a killed leader) may hang rather
		// than fail, and the budget would go with it
		// (TestClusterEtcdLeaderKilled: two admissions refused 503). Later
		// ones get what is left, so a slow but working etcd still commits.
		actx, acancel := ctx, context.CancelFunc(func() {})
		if attempt == 0 {
			actx, acancel = context.WithTimeout(ctx, max(n.cfg.RequestTimeout/4, 100*time.Millisecond))
		}
		resp, err = n.cli.Txn(actx).
			If(clientv3.Compare(clientv3.CreateRevision(n.shardKey(shard)), "=", epoch)).
			Then(ops...).
			Commit()
		acancel()
		// A leader change fails a transaction at once (the client does not
		// retry writes). The values are whole records fenced on the epoch,
		// so writing them again is harmless (an abandoned attempt that
		// lands later writes the same): try again until the request
		// timeout, which outlasts an election.
		if err == nil || ctx.Err() != nil {
			break
		}
		sleep(ctx, 50*time.Millisecond)
	}
	n.m.etcd("commit", time.Since(start))
	switch {
	case err != nil:
		n.m.commits.WithLabelValues("error").Inc()
		return fmt.Errorf("cluster: commit shard %d: %w", shard, err)
	case !resp.Succeeded:
		n.m.commits.WithLabelValues("fenced").Inc()
		return fmt.Errorf("%w: shard %d epoch %d", ErrNotOwner, shard, epoch)
	}
	n.m.commits.WithLabelValues("ok").Add(float64(len(reqs)))
	return nil
}

// Load reads every value kept for shard: what a new owner reads, after its
// claim, to rebuild the shard's keys. The read is linearizable, so it sees
// every commit the previous owners had acknowledged.
func (n *Node) Load(ctx context.Context, shard int) (map[string][]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, n.cfg.RequestTimeout)
	defer cancel()
	prefix := n.dataPrefix(shard)
	start := time.Now()
	resp, err := n.cli.Get(ctx, prefix, clientv3.WithPrefix())
	n.m.etcd("load", time.Since(start))
	if err != nil {
		return nil, fmt.Errorf("cluster: load shard %d: %w", shard, err)
	}
	out := make(map[string][]byte, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		out[strings.TrimPrefix(string(kv.Key), prefix)] = kv.Value
	}
	return out, nil
}
