package cluster

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// Locks serializes changes to one entity across the nodes: a node holds
// an entity's lock (an etcd mutex under the node's own lease) from before
// it reads the entity's state until its change is acknowledged. Whoever
// releases a lock records, in the same transaction, the position of its
// last acknowledged write in the replicated log, and the next holder
// waits until it has applied that far: it decides on a state that holds
// every earlier change, whichever node made it, and its record follows
// theirs in the log, so every node applies the changes in the order they
// were decided. A node that dies holding a lock loses it with its lease.
//
// What uses them: a key's changes (rotate, revoke, update, delete) and a
// gateway session's turns; a user's changes and logins, an email's
// registration, the creation of an owner's keys. Callers on one node take
// turns at a name before they ask etcd for it.
type Locks struct {
	cli     *clientv3.Client
	prefix  string
	node    string
	ttl     int
	applied func() uint64 // the replicated log's position applied here
	written func() uint64 // this node's last acknowledged write

	mu    sync.Mutex
	sess  *concurrency.Session
	local map[string]*localLock // names held or waited for on this node
}

// localLock makes the callers on this node who want one name take turns
// before the etcd mutex: two mutexes on one lease share one key in etcd,
// so the etcd mutex alone would let them both in.
type localLock struct {
	ch   chan struct{} // holds a token while some caller holds the name
	refs int           // callers holding or waiting; the entry goes at 0
}

// NewLocks returns the entity locks of node, under prefix.
func NewLocks(cli *clientv3.Client, prefix, node string, ttl time.Duration, applied, written func() uint64) *Locks {
	return &Locks{cli: cli, prefix: prefix, node: node, ttl: max(int(ttl/time.Second), 1), applied: applied, written: written, local: map[string]*localLock{}}
}

// SessionLocks are the locks of gateway sessions, by user and key.
type SessionLocks struct{ l *Locks }

// Sessions returns the locks of gateway sessions.
func (l *Locks) Sessions() SessionLocks { return SessionLocks{l} }

// Lock takes the lock of user's session key.
func (s SessionLocks) Lock(ctx context.Context, user, key string) (func(), error) {
	h := sha256.Sum256([]byte(user + "\x00" + key))
	return s.l.Lock(ctx, "session/"+hex.EncodeToString(h[:16]))
}

// session returns the node's lock session, a new one if the last expired.
func (l *Locks) session(ctx context.Context) (*concurrency.Session, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.sess != nil {
		select {
		case <-l.sess.Done():
			l.sess = nil
		default:
			return l.sess, nil
		}
	}
	// The lease is granted under the caller's deadline: a session's own
	// grant would run under its context, which must outlive the caller,
	// and without quorum it would wait forever (a CreateUser hung).
	g, err := l.cli.Grant(ctx, int64(l.ttl))
	if err != nil {
		return nil, fmt.Errorf("cluster: lock: grant a lease: %w", err)
	}
	s, err := concurrency.NewSession(l.cli, concurrency.WithLease(g.ID), concurrency.WithContext(context.WithoutCancel(ctx)))
	if err != nil {
		return nil, fmt.Errorf("cluster: lock: %w", err)
	}
	l.sess = s
	return s, nil
}

// dropSession forgets s if it is the node's session (its lease is gone:
// the next Lock starts another).
func (l *Locks) dropSession(s *concurrency.Session) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.sess == s {
		_ = s.Close()
		l.sess = nil
	}
}

// Lock waits until this node holds the lock name (a path, such as
// "key/{id}") and has applied every write its previous holder
// acknowledged; unlock releases it.
func (l *Locks) Lock(ctx context.Context, name string) (unlock func(), err error) {
	unlockLocal, err := l.lockLocal(ctx, name)
	if err != nil {
		return nil, err
	}
	unlockShared, err := l.lockShared(ctx, name)
	if err != nil {
		unlockLocal()
		return nil, err
	}
	return func() { unlockShared(); unlockLocal() }, nil
}

// lockLocal waits for this node's turn at name.
func (l *Locks) lockLocal(ctx context.Context, name string) (func(), error) {
	l.mu.Lock()
	ll := l.local[name]
	if ll == nil {
		ll = &localLock{ch: make(chan struct{}, 1)}
		l.local[name] = ll
	}
	ll.refs++
	l.mu.Unlock()
	done := func() {
		l.mu.Lock()
		if ll.refs--; ll.refs == 0 {
			delete(l.local, name)
		}
		l.mu.Unlock()
	}
	select {
	case ll.ch <- struct{}{}:
		return func() { <-ll.ch; done() }, nil
	case <-ctx.Done():
		done()
		return nil, fmt.Errorf("cluster: lock: waiting for this node's turn: %w", ctx.Err())
	}
}

// lockShared takes the etcd mutex of name, then waits until this node has
// applied its previous holder's writes.
func (l *Locks) lockShared(ctx context.Context, name string) (unlock func(), err error) {
	// etcd must answer within the lease's TTL: without quorum a change is
	// refused then, not left waiting for the caller's deadline (waiting
	// for another holder below is bounded by the caller alone). The
	// probe is a linearizable read, which needs quorum as the lock does.
	pctx, cancel := context.WithTimeout(ctx, time.Duration(l.ttl)*time.Second)
	defer cancel()
	if _, err := l.cli.Get(pctx, l.prefix+"/locks/"+name, clientv3.WithCountOnly()); err != nil {
		return nil, fmt.Errorf("cluster: lock: etcd: %w", err)
	}
	s, err := l.session(pctx)
	if err != nil {
		return nil, err
	}
	lockName, seqName := l.prefix+"/locks/"+name, l.prefix+"/lockseq/"+name
	m := concurrency.NewMutex(s, lockName)
	if err := m.Lock(ctx); err != nil {
		if !errors.Is(err, rpctypes.ErrLeaseNotFound) {
			return nil, fmt.Errorf("cluster: lock: %w", err)
		}
		// The session's lease ran out (keep-alives late under load)
		// before the session noticed: start another, once.
		l.dropSession(s)
		if s, err = l.session(pctx); err != nil {
			return nil, err
		}
		m = concurrency.NewMutex(s, lockName)
		if err := m.Lock(ctx); err != nil {
			return nil, fmt.Errorf("cluster: lock: %w", err)
		}
	}
	release := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		// The position and the release in one transaction, fenced on the
		// lock still being ours.
		_, _ = l.cli.Txn(ctx).
			If(m.IsOwner()).
			Then(clientv3.OpPut(seqName, l.node+" "+strconv.FormatUint(l.written(), 10)), clientv3.OpDelete(m.Key())).
			Commit()
	}
	resp, err := l.cli.Get(ctx, seqName)
	if err != nil {
		release()
		return nil, fmt.Errorf("cluster: lock: %w", err)
	}
	if len(resp.Kvs) == 1 {
		node, pos, _ := strings.Cut(string(resp.Kvs[0].Value), " ")
		seq, _ := strconv.ParseUint(pos, 10, 64)
		for node != l.node && l.applied() < seq {
			select {
			case <-ctx.Done():
				release()
				return nil, fmt.Errorf("cluster: lock: waiting for the previous turn: %w", ctx.Err())
			case <-time.After(5 * time.Millisecond):
			}
		}
	}
	return release, nil
}

// Close ends the node's lock session (its locks go with it).
func (l *Locks) Close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.sess != nil {
		_ = l.sess.Close()
		l.sess = nil
	}
}
