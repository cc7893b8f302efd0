package etcdlog

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// Snapshots keeps the snapshots of a Log's state in etcd, beside the log:
//
//	{prefix}/snap/{pos:020d}/{i:06d}   the payload in chunks of at most MaxValue bytes
//	{prefix}/snapshot                  the pointer to the complete snapshot
//	{prefix}/snaplock/…                the lock of the node taking one
//
// A snapshot is written chunks first, then the pointer, in a transaction
// fenced on the lock (so a node that lost the lock while it wrote cannot
// replace a newer snapshot) that also deletes every other snapshot's
// chunks. A crash before the pointer leaves chunks nobody names (the next
// snapshot deletes them) and the previous snapshot in force; a reader reads
// the pointer and the chunks it names at one revision, so a snapshot
// replaced while it reads still reads whole.
//
// The pointer's value: a version byte (2), then uvarints: the position
// (the sequence number of the log the snapshot holds every record up to),
// the payload's size, the number of chunks, the time taken (Unix ms); the
// writer's node id (a uvarint length, then its bytes); then the payload's
// CRC-32C (4 bytes, big-endian) and the MAC (32 bytes, auth.go) of the
// pointer before it and the payload, under the writer's key. A version 1
// pointer has neither the writer nor the MAC, and is refused (ErrForged)
// unless Auth.AcceptUnauthenticated.
type Snapshots struct {
	l   *Log
	ttl int // the lock's lease, in seconds
	// chunk is the size of a chunk (MaxValue; tests make it smaller).
	chunk int
}

// ErrNoSnapshot: there is no complete snapshot in etcd.
var ErrNoSnapshot = errors.New("etcdlog: no snapshot")

const (
	snapshotVersion       = 2
	legacySnapshotVersion = 1
)

// Snapshots returns the log's snapshot store; lockTTL is the lease of its
// lock, which a node that dies while taking a snapshot loses after it.
func (l *Log) Snapshots(lockTTL time.Duration) *Snapshots {
	return &Snapshots{l: l, ttl: max(int(lockTTL/time.Second), 1), chunk: MaxValue}
}

// Log is the log the snapshots are of.
func (s *Snapshots) Log() *Log { return s.l }

func (s *Snapshots) pointerKey() string { return s.l.prefix + "snapshot" }
func (s *Snapshots) chunksPrefix() string {
	return s.l.prefix + "snap/"
}
func (s *Snapshots) chunkDir(pos uint64) string {
	return s.chunksPrefix() + fmt.Sprintf("%020d/", pos)
}

// SnapshotInfo describes a complete snapshot.
type SnapshotInfo struct {
	Pos    uint64    // the log position it holds every record up to
	Size   int       // payload bytes
	Chunks int       // etcd keys holding the payload
	Taken  time.Time // when its pointer was written (the writer's clock)
	Writer string    // the node id that wrote it (empty in a version 1 pointer)
	sum    uint32
	rev    int64  // the pointer's mod revision
	signed []byte // the pointer before its MAC (nil: version 1)
	mac    []byte
}

// encode returns the pointer, its MAC over it and payload last.
func (i SnapshotInfo) encode(a *authenticator, payload []byte) []byte {
	b := []byte{snapshotVersion}
	b = binary.AppendUvarint(b, i.Pos)
	b = binary.AppendUvarint(b, uint64(i.Size))
	b = binary.AppendUvarint(b, uint64(i.Chunks))
	b = binary.AppendUvarint(b, uint64(i.Taken.UnixMilli()))
	b = binary.AppendUvarint(b, uint64(len(i.Writer)))
	b = append(b, i.Writer...)
	b = binary.BigEndian.AppendUint32(b, i.sum)
	return append(b, a.mac(macSnapshot, i.Writer, i.Pos, b, payload)...)
}

func decodeInfo(b []byte) (SnapshotInfo, error) {
	if len(b) < 5 || (b[0] != snapshotVersion && b[0] != legacySnapshotVersion) {
		return SnapshotInfo{}, fmt.Errorf("%w: snapshot pointer version", ErrForged)
	}
	var signed, mac []byte
	if b[0] == snapshotVersion {
		if len(b) < 5+macSize {
			return SnapshotInfo{}, fmt.Errorf("%w: snapshot pointer without a MAC", ErrForged)
		}
		signed, mac, b = b[:len(b)-macSize], b[len(b)-macSize:], b[:len(b)-macSize]
	}
	r := b[1 : len(b)-4]
	var v [4]uint64
	for i := range v {
		x, k := binary.Uvarint(r)
		if k <= 0 {
			return SnapshotInfo{}, fmt.Errorf("%w: snapshot pointer", ErrCorrupt)
		}
		v[i], r = x, r[k:]
	}
	var writer string
	if signed != nil {
		x, k := binary.Uvarint(r)
		if k <= 0 || x > uint64(len(r)-k) {
			return SnapshotInfo{}, fmt.Errorf("%w: snapshot pointer", ErrCorrupt)
		}
		writer, r = string(r[k:k+int(x)]), r[k+int(x):]
	}
	if len(r) != 0 || v[1] > 1<<40 || v[2] > 1<<30 {
		return SnapshotInfo{}, fmt.Errorf("%w: snapshot pointer", ErrCorrupt)
	}
	return SnapshotInfo{Pos: v[0], Size: int(v[1]), Chunks: int(v[2]), Taken: time.UnixMilli(int64(v[3])), Writer: writer,
		sum: binary.BigEndian.Uint32(b[len(b)-4:]), signed: signed, mac: mac}, nil
}

// authenticate checks a loaded snapshot's MAC: ErrForged (counted and
// logged) when it does not verify, or the pointer has none and the log
// does not accept unauthenticated ones.
func (s *Snapshots) authenticate(info SnapshotInfo, payload []byte) error {
	var err error
	switch {
	case info.signed == nil && !s.l.auth.legacy:
		err = fmt.Errorf("%w: snapshot %d: %w", ErrForged, info.Pos, ErrLegacy)
	case info.signed != nil && !s.l.auth.verify(info.mac, macSnapshot, info.Writer, info.Pos, info.signed, payload):
		err = fmt.Errorf("%w: snapshot %d: MAC", ErrForged, info.Pos)
	}
	if err != nil {
		s.l.auth.reject("snapshot", info.Writer, s.pointerKey(), err)
	}
	return err
}

// Latest returns the pointer of the newest complete snapshot (not its
// payload), or ErrNoSnapshot.
func (s *Snapshots) Latest(ctx context.Context) (SnapshotInfo, error) {
	rctx, cancel := context.WithTimeout(ctx, s.l.timeout)
	defer cancel()
	resp, err := s.l.cli.Get(rctx, s.pointerKey())
	if err != nil {
		return SnapshotInfo{}, fmt.Errorf("etcdlog: read the snapshot pointer: %w", err)
	}
	if len(resp.Kvs) == 0 {
		return SnapshotInfo{}, ErrNoSnapshot
	}
	info, err := decodeInfo(resp.Kvs[0].Value)
	info.rev = resp.Kvs[0].ModRevision
	return info, err
}

// Load returns the newest complete snapshot and its payload, or
// ErrNoSnapshot. The payload is checked (size, chunk count, CRC-32C):
// ErrCorrupt if it does not add up.
func (s *Snapshots) Load(ctx context.Context) (SnapshotInfo, []byte, error) {
	for {
		info, payload, err := s.load(ctx)
		if errors.Is(err, rpctypes.ErrCompacted) && ctx.Err() == nil {
			continue // the revision read went away under us: read the pointer again
		}
		return info, payload, err
	}
}

// chunkPage is how many chunks one range read of Load takes (each up to
// MaxValue bytes).
const chunkPage = 8

func (s *Snapshots) load(ctx context.Context) (SnapshotInfo, []byte, error) {
	rctx, cancel := context.WithTimeout(ctx, s.l.timeout)
	resp, err := s.l.cli.Get(rctx, s.pointerKey())
	cancel()
	if err != nil {
		return SnapshotInfo{}, nil, fmt.Errorf("etcdlog: read the snapshot pointer: %w", err)
	}
	if len(resp.Kvs) == 0 {
		return SnapshotInfo{}, nil, ErrNoSnapshot
	}
	at := resp.Header.Revision
	info, err := decodeInfo(resp.Kvs[0].Value)
	if errors.Is(err, ErrForged) {
		s.l.auth.reject("snapshot", "", s.pointerKey(), err)
	}
	if err != nil {
		return SnapshotInfo{}, nil, err
	}
	info.rev = resp.Kvs[0].ModRevision
	dir := s.chunkDir(info.Pos)
	end := clientv3.GetPrefixRangeEnd(dir)
	payload := make([]byte, 0, min(info.Size, 64<<20)) // the pointer is not authenticated yet
	chunks := 0
	for from := dir; ; {
		rctx, cancel := context.WithTimeout(ctx, s.l.timeout)
		resp, err := s.l.cli.Get(rctx, from, clientv3.WithRange(end), clientv3.WithRev(at), clientv3.WithLimit(chunkPage),
			clientv3.WithSort(clientv3.SortByKey, clientv3.SortAscend))
		cancel()
		if err != nil {
			return SnapshotInfo{}, nil, fmt.Errorf("etcdlog: read snapshot %d: %w", info.Pos, err)
		}
		for _, kv := range resp.Kvs {
			if len(payload)+len(kv.Value) > info.Size {
				return SnapshotInfo{}, nil, fmt.Errorf("%w: snapshot %d is larger than its pointer says", ErrCorrupt, info.Pos)
			}
			payload = append(payload, kv.Value...)
			chunks++
		}
		if !resp.More || len(resp.Kvs) == 0 {
			break
		}
		from = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
	if chunks != info.Chunks || len(payload) != info.Size || crc32.Checksum(payload, castagnoli) != info.sum {
		return SnapshotInfo{}, nil, fmt.Errorf("%w: snapshot %d: %d chunks of %d bytes do not add up to its pointer's %d of %d",
			ErrCorrupt, info.Pos, chunks, len(payload), info.Chunks, info.Size)
	}
	if err := s.authenticate(info, payload); err != nil {
		return SnapshotInfo{}, nil, err
	}
	return info, payload, nil
}

// ErrLocked: another node holds the snapshot lock.
var ErrLocked = errors.New("etcdlog: another node is taking a snapshot")

// SnapshotLock is the cluster-wide right to write a snapshot, held under
// its own lease until Unlock.
type SnapshotLock struct {
	s    *Snapshots
	sess *concurrency.Session
	m    *concurrency.Mutex
}

// Lock takes the snapshot lock without waiting: ErrLocked when another
// node holds it.
func (s *Snapshots) Lock(ctx context.Context) (*SnapshotLock, error) {
	// The lease is granted here, bounded by the timeout (a session's own
	// grant would wait as long as its context, which must outlive this
	// call to keep the lease alive: without quorum, forever).
	rctx, cancel := context.WithTimeout(ctx, s.l.timeout)
	defer cancel()
	lease, err := s.l.cli.Grant(rctx, int64(s.ttl))
	if err != nil {
		return nil, fmt.Errorf("etcdlog: snapshot lock: %w", err)
	}
	sess, err := concurrency.NewSession(s.l.cli, concurrency.WithLease(lease.ID), concurrency.WithTTL(s.ttl), concurrency.WithContext(context.WithoutCancel(ctx)))
	if err != nil {
		return nil, fmt.Errorf("etcdlog: snapshot lock: %w", err)
	}
	m := concurrency.NewMutex(sess, s.l.prefix+"snaplock")
	if err := m.TryLock(rctx); err != nil {
		_ = sess.Close()
		if errors.Is(err, concurrency.ErrLocked) {
			return nil, ErrLocked
		}
		return nil, fmt.Errorf("etcdlog: snapshot lock: %w", err)
	}
	return &SnapshotLock{s: s, sess: sess, m: m}, nil
}

// Unlock releases the lock (and its lease).
func (k *SnapshotLock) Unlock() {
	ctx, cancel := context.WithTimeout(context.Background(), k.s.l.timeout)
	defer cancel()
	_ = k.m.Unlock(ctx)
	_ = k.sess.Close()
}

// Save writes payload as the snapshot at log position pos and returns the
// snapshot it replaced (Pos 0: none). The chunks first, each in its own
// request (a value of up to MaxValue bytes is close to etcd's request
// limit), then in one transaction, fenced on the lock and on the pointer
// being the one read first: the pointer, and the deletion of every other
// snapshot's chunks. A position not after the current snapshot's is
// refused.
func (k *SnapshotLock) Save(ctx context.Context, pos uint64, payload []byte) (SnapshotInfo, error) {
	s := k.s
	prev, err := s.Latest(ctx)
	if errors.Is(err, ErrNoSnapshot) {
		prev, err = SnapshotInfo{}, nil
	}
	if err != nil {
		return SnapshotInfo{}, err
	}
	if prev.Pos >= pos {
		return SnapshotInfo{}, fmt.Errorf("etcdlog: save snapshot at %d: the current one is at %d", pos, prev.Pos)
	}
	dir := s.chunkDir(pos)
	n := 0
	for off := 0; off < len(payload) || n == 0; off += s.chunk {
		chunk := payload[off:min(len(payload), off+s.chunk)]
		rctx, cancel := context.WithTimeout(ctx, s.l.timeout)
		_, err := s.l.cli.Put(rctx, dir+fmt.Sprintf("%06d", n), string(chunk))
		cancel()
		if err != nil {
			return SnapshotInfo{}, fmt.Errorf("etcdlog: save snapshot at %d: chunk %d: %w", pos, n, err)
		}
		n++
	}
	info := SnapshotInfo{Pos: pos, Size: len(payload), Chunks: n, Taken: time.Now(), Writer: s.l.writer, sum: crc32.Checksum(payload, castagnoli)}
	cmp := clientv3.Compare(clientv3.ModRevision(s.pointerKey()), "=", prev.rev)
	all := s.chunksPrefix()
	rctx, cancel := context.WithTimeout(ctx, s.l.timeout)
	defer cancel()
	resp, err := s.l.cli.Txn(rctx).If(k.m.IsOwner(), cmp).Then(
		clientv3.OpPut(s.pointerKey(), string(info.encode(s.l.auth, payload))),
		clientv3.OpDelete(all, clientv3.WithRange(dir)),                                                         // the older ones
		clientv3.OpDelete(clientv3.GetPrefixRangeEnd(dir), clientv3.WithRange(clientv3.GetPrefixRangeEnd(all))), // unfinished later ones
	).Commit()
	if err != nil {
		return SnapshotInfo{}, fmt.Errorf("etcdlog: save snapshot at %d: pointer: %w (outcome unknown)", pos, err)
	}
	if !resp.Succeeded {
		return SnapshotInfo{}, fmt.Errorf("etcdlog: save snapshot at %d: the lock was lost or another snapshot was saved meanwhile", pos)
	}
	return prev, nil
}

// Compact compacts etcd's history below the revision of log position
// before: what Truncate deleted then frees its space (once etcd's members
// are defragmented, see docs/cluster.md). A watch or a read at an older
// revision then fails (a Follow from before it gets ErrCompacted).
func (l *Log) Compact(ctx context.Context, before uint64) error {
	rev := Rev(before)
	if rev <= 1 {
		return nil
	}
	rctx, cancel := context.WithTimeout(ctx, l.timeout)
	defer cancel()
	if _, err := l.cli.Compact(rctx, rev); err != nil && !errors.Is(err, rpctypes.ErrCompacted) &&
		!strings.Contains(err.Error(), "compacted") {
		return fmt.Errorf("etcdlog: compact below revision %d: %w", rev, err)
	}
	return nil
}
