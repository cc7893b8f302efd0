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

// SessionLocks serializes the turns of one gateway session across the
// nodes: a node holds a session's lock (an etcd mutex under its own
// lease) from before it reads the session's history until its turn is
// recorded. Whoever releases the lock records the position of its last
// acknowledged write in the replicated log, and the next holder waits
// until it has applied that far, so it reads a history that holds every
// earlier turn, whichever node ran it. A node that dies holding a lock
// loses it with its lease.
//
// On one node the session's tenant shard serializes its turns; the lock
// is taken after that, so a node never asks for a lock it holds.
type SessionLocks struct {
	cli     *clientv3.Client
	prefix  string
	node    string
	ttl     int
	applied func() uint64 // the replicated log's position applied here
	written func() uint64 // this node's last acknowledged write

	mu   sync.Mutex
	sess *concurrency.Session
}

// NewSessionLocks returns the session locks of node, under prefix.
func NewSessionLocks(cli *clientv3.Client, prefix, node string, ttl time.Duration, applied, written func() uint64) *SessionLocks {
	return &SessionLocks{cli: cli, prefix: prefix, node: node, ttl: max(int(ttl/time.Second), 1), applied: applied, written: written}
}

// session returns the node's lock session, a new one if the last expired.
func (l *SessionLocks) session(ctx context.Context) (*concurrency.Session, error) {
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
		return nil, fmt.Errorf("cluster: session lock: %w", err)
	}
	l.sess = s
	return s, nil
}

func (l *SessionLocks) names(user, key string) (lock, seq string) {
	h := sha256.Sum256([]byte(user + "\x00" + key))
	id := hex.EncodeToString(h[:16])
	return l.prefix + "/locks/session/" + id, l.prefix + "/sessionseq/" + id
}

// Lock waits until this node holds user's session key and has applied
// every write the previous holder acknowledged; unlock releases it.
func (l *SessionLocks) Lock(ctx context.Context, user, key string) (unlock func(), err error) {
	s, err := l.session(ctx)
	if err != nil {
		return nil, err
	}
	lockName, seqName := l.names(user, key)
	m := concurrency.NewMutex(s, lockName)
	if err := m.Lock(ctx); err != nil {
		return nil, fmt.Errorf("cluster: session lock: %w", err)
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
		return nil, fmt.Errorf("cluster: session lock: %w", err)
	}
	if len(resp.Kvs) == 1 {
		node, pos, _ := strings.Cut(string(resp.Kvs[0].Value), " ")
		seq, _ := strconv.ParseUint(pos, 10, 64)
		for node != l.node && l.applied() < seq {
			select {
			case <-ctx.Done():
				release()
				return nil, fmt.Errorf("cluster: session lock: waiting for the previous turn: %w", ctx.Err())
			case <-time.After(5 * time.Millisecond):
			}
		}
	}
	return release, nil
}

// Close ends the node's lock session (its locks go with it).
func (l *SessionLocks) Close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.sess != nil {
		_ = l.sess.Close()
		l.sess = nil
	}
}
