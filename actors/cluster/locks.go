package cluster

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

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
// gateway session's turns. A node never asks for a lock it holds: the
// entity's local actor serializes its own changes first.
type Locks struct {
	cli     *clientv3.Client
	prefix  string
	node    string
	ttl     int
	applied func() uint64 // the replicated log's position applied here
	written func() uint64 // this node's last acknowledged write

	mu   sync.Mutex
	sess *concurrency.Session
}

// NewLocks returns the entity locks of node, under prefix.
func NewLocks(cli *clientv3.Client, prefix, node string, ttl time.Duration, applied, written func() uint64) *Locks {
	return &Locks{cli: cli, prefix: prefix, node: node, ttl: max(int(ttl/time.Second), 1), applied: applied, written: written}
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
	s, err := concurrency.NewSession(l.cli, concurrency.WithTTL(l.ttl), concurrency.WithContext(context.WithoutCancel(ctx)))
	if err != nil {
		return nil, fmt.Errorf("cluster: lock: %w", err)
	}
	l.sess = s
	return s, nil
}

// Lock waits until this node holds the lock name (a path, such as
// "key/{id}") and has applied every write its previous holder
// acknowledged; unlock releases it.
func (l *Locks) Lock(ctx context.Context, name string) (unlock func(), err error) {
	s, err := l.session(ctx)
	if err != nil {
		return nil, err
	}
	lockName, seqName := l.prefix+"/locks/"+name, l.prefix+"/lockseq/"+name
	m := concurrency.NewMutex(s, lockName)
	if err := m.Lock(ctx); err != nil {
		return nil, fmt.Errorf("cluster: lock: %w", err)
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
