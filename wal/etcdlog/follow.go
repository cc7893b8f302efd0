package etcdlog

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"strconv"
	"strings"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"gatehouse/wal"
)

// pageSize is how many entries one range read of Follow takes.
const pageSize = 256

// Follow calls fn for every record after sequence number after, in the
// log's order, first those already written (read at one revision), then
// each batch as it commits, until ctx ends or fn fails. It returns
// ErrCompacted when etcd no longer has the revisions after after. writer
// is the id of the Log that appended the record.
func (l *Log) Follow(ctx context.Context, after uint64, fn func(seq uint64, writer string, rec wal.Record) error) error {
	pinned, err := l.catchUp(ctx, after, fn, false)
	if err != nil {
		return err
	}
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	for resp := range l.cli.Watch(wctx, l.logPrefix(), clientv3.WithPrefix(), clientv3.WithRev(pinned+1)) {
		if resp.CompactRevision != 0 {
			return fmt.Errorf("%w: at revision %d", ErrCompacted, resp.CompactRevision)
		}
		if err := resp.Err(); err != nil {
			return fmt.Errorf("etcdlog: follow: watch: %w", err)
		}
		for _, ev := range resp.Events {
			if ev.Type != mvccpb.PUT || ev.Kv.CreateRevision != ev.Kv.ModRevision {
				continue // a truncation, or a rewrite (none are made)
			}
			if err := l.deliver(ctx, ev.Kv, after, fn, false); err != nil {
				return err
			}
		}
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return errors.New("etcdlog: follow: watch closed")
}

// Replay calls fn for every record after sequence number after that is
// in the log now (read at one revision), in order, and returns the
// position it read up to: Follow from there continues exactly after the
// last record Replay delivered.
func (l *Log) Replay(ctx context.Context, after uint64, fn func(seq uint64, writer string, rec wal.Record) error) (uint64, error) {
	pinned, err := l.catchUp(ctx, after, fn, true)
	if err != nil {
		return 0, err
	}
	return max(after, Seq(pinned, MaxBatch-1)), nil
}

// catchUp delivers the records after after as of one revision, which it
// returns; legacy as deliver's.
func (l *Log) catchUp(ctx context.Context, after uint64, fn func(uint64, string, wal.Record) error, legacy bool) (int64, error) {
	rev := Rev(after)
	var pinned int64 // the revision the catch-up reads at
	for {
		opts := []clientv3.OpOption{clientv3.WithPrefix(), clientv3.WithMinModRev(max(rev, 1)),
			clientv3.WithSort(clientv3.SortByModRevision, clientv3.SortAscend), clientv3.WithLimit(pageSize)}
		if pinned != 0 {
			opts = append(opts, clientv3.WithRev(pinned))
		}
		rctx, cancel := context.WithTimeout(ctx, l.timeout)
		resp, err := l.cli.Get(rctx, l.logPrefix(), opts...)
		cancel()
		if err != nil {
			if errors.Is(err, rpctypes.ErrCompacted) {
				return 0, fmt.Errorf("%w: %w", ErrCompacted, err)
			}
			return 0, fmt.Errorf("etcdlog: follow: %w", err)
		}
		if pinned == 0 {
			pinned = resp.Header.Revision
			if err := l.checkKept(ctx, after, pinned); err != nil {
				return 0, err
			}
		}
		for _, kv := range resp.Kvs {
			if err := l.deliver(ctx, kv, after, fn, legacy); err != nil {
				return 0, err
			}
			rev = kv.ModRevision + 1
		}
		if !resp.More {
			return pinned, nil
		}
	}
}

// checkKept fails with ErrCompacted when batches after after may have
// been truncated: the log keeps {prefix}/truncated, the revision below
// which Truncate has deleted.
func (l *Log) checkKept(ctx context.Context, after uint64, at int64) error {
	rctx, cancel := context.WithTimeout(ctx, l.timeout)
	defer cancel()
	resp, err := l.cli.Get(rctx, l.truncatedKey(), clientv3.WithRev(at))
	if err != nil {
		return fmt.Errorf("etcdlog: follow: %w", err)
	}
	if len(resp.Kvs) == 0 {
		return nil
	}
	below, err := strconv.ParseInt(string(resp.Kvs[0].Value), 10, 64)
	if err != nil {
		return fmt.Errorf("%w: %s", ErrCorrupt, l.truncatedKey())
	}
	if after+1 < Seq(below, 0) { // a record after after, at a revision below the cut, may be gone
		return fmt.Errorf("%w: truncated below revision %d, asked from %d", ErrCompacted, below, Rev(after))
	}
	return nil
}

func (l *Log) truncatedKey() string { return l.prefix + "truncated" }

// deliver decodes one entry and calls fn for its records after after. An
// entry that is not authenticated (ErrForged) is skipped: counted, and
// logged once per writer name. With legacy set (Replay, at a node's
// start), an entry in the pre-MAC format is an error instead (ErrLegacy):
// the log of a cluster upgraded without
// cluster.etcd.accept_unauthenticated, whose records a node must not
// start without.
func (l *Log) deliver(ctx context.Context, kv *mvccpb.KeyValue, after uint64, fn func(uint64, string, wal.Record) error, legacy bool) error {
	writer, n, err := l.parseEntryKey(string(kv.Key))
	if err != nil { // no node writes such a key
		l.auth.reject("entry", "", string(kv.Key), fmt.Errorf("%w: %w", ErrForged, err))
		return nil
	}
	body, err := l.entryBody(ctx, kv, writer, n)
	if legacy && errors.Is(err, ErrLegacy) {
		l.auth.reject("entry", writer, string(kv.Key), err)
		return err
	}
	if errors.Is(err, ErrForged) {
		l.auth.reject("entry", writer, string(kv.Key), err)
		return nil
	}
	if err != nil {
		return err
	}
	recs, err := decodeBatch(body)
	if err != nil {
		return fmt.Errorf("%s: %w", kv.Key, err)
	}
	for i, r := range recs {
		if seq := Seq(kv.CreateRevision, i); seq > after {
			if err := fn(seq, writer, r); err != nil {
				return err
			}
		}
	}
	return nil
}

// entryBody returns an entry's batch, reading its parts if it has them,
// once its MAC verified: ErrForged if it does not (or the entry has none
// and the log does not accept unauthenticated ones, or its parts do not
// add up: only its MAC could tell a genuine entry's).
func (l *Log) entryBody(ctx context.Context, kv *mvccpb.KeyValue, writer string, n uint64) ([]byte, error) {
	v := kv.Value
	if len(v) < 2 {
		return nil, fmt.Errorf("%w: %s: %d bytes", ErrForged, kv.Key, len(v))
	}
	switch v[0] {
	case entryVersion:
		if len(v) < 2+macSize {
			return nil, fmt.Errorf("%w: %s: no MAC", ErrForged, kv.Key)
		}
		sum, v := v[len(v)-macSize:], v[:len(v)-macSize]
		if v[1] == 0 {
			if !l.auth.verify(sum, macEntry, writer, n, v) {
				return nil, fmt.Errorf("%w: %s: MAC", ErrForged, kv.Key)
			}
			return v[2:], nil
		}
		body, err := l.readParts(ctx, string(kv.Key), v[2:], writer, n)
		if errors.Is(err, ErrCorrupt) {
			return nil, fmt.Errorf("%w: %w", ErrForged, err)
		}
		if err != nil {
			return nil, err
		}
		if !l.auth.verify(sum, macEntry, writer, n, v, body) {
			return nil, fmt.Errorf("%w: %s: MAC", ErrForged, kv.Key)
		}
		return body, nil
	case legacyVersion:
		if !l.auth.legacy {
			return nil, fmt.Errorf("%w: %w: %s", ErrForged, ErrLegacy, kv.Key)
		}
		if v[1] == 0 {
			return v[2:], nil
		}
		return l.readParts(ctx, string(kv.Key), v[2:], writer, n)
	default:
		return nil, fmt.Errorf("%w: %s: version %d", ErrForged, kv.Key, v[0])
	}
}

// readParts reads the parts of writer's entry n, whose value after the
// version and the parts flag is r: ErrCorrupt if they do not add up.
func (l *Log) readParts(ctx context.Context, key string, r []byte, writer string, n uint64) ([]byte, error) {
	parts, k := binary.Uvarint(r)
	if k <= 0 || parts == 0 || parts > 1<<20 {
		return nil, fmt.Errorf("%w: %s: parts", ErrCorrupt, key)
	}
	r = r[k:]
	size, k := binary.Uvarint(r)
	if k <= 0 || len(r[k:]) != 4 || size > parts*MaxValue {
		return nil, fmt.Errorf("%w: %s: size", ErrCorrupt, key)
	}
	sum := binary.BigEndian.Uint32(r[k:])
	prefix := l.prefix + "part/" + writer + "/" + fmt.Sprintf("%020d/", n)
	rctx, cancel := context.WithTimeout(ctx, l.timeout)
	defer cancel()
	resp, err := l.cli.Get(rctx, prefix, clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByKey, clientv3.SortAscend))
	if err != nil {
		return nil, fmt.Errorf("etcdlog: read parts of %s: %w", key, err)
	}
	if uint64(len(resp.Kvs)) != parts {
		return nil, fmt.Errorf("%w: %s: %d parts of %d", ErrCorrupt, key, len(resp.Kvs), parts)
	}
	body := make([]byte, 0, size)
	for _, p := range resp.Kvs {
		body = append(body, p.Value...)
	}
	if uint64(len(body)) != size || crc32.Checksum(body, castagnoli) != sum {
		return nil, fmt.Errorf("%w: %s: parts do not add up", ErrCorrupt, key)
	}
	return body, nil
}

// parseEntryKey splits {prefix}/log/{writer}/{n}.
func (l *Log) parseEntryKey(key string) (writer string, n uint64, err error) {
	rest := strings.TrimPrefix(key, l.logPrefix())
	writer, num, ok := strings.Cut(rest, "/")
	if !ok || len(rest) == len(key) {
		return "", 0, fmt.Errorf("%w: key %q", ErrCorrupt, key)
	}
	n, err = strconv.ParseUint(num, 10, 64)
	if err != nil {
		return "", 0, fmt.Errorf("%w: key %q", ErrCorrupt, key)
	}
	return writer, n, nil
}

// Truncate deletes the entries (and their parts) of every writer's
// batches committed at revisions before the one holding sequence number
// before: what a snapshot at before has made unnecessary. It first
// records the cut, so that a Follow from before it fails with
// ErrCompacted instead of missing records. (Parts whose entry never
// committed are left: at most one large batch per writer crash.)
func (l *Log) Truncate(ctx context.Context, before uint64) (int, error) {
	rev := Rev(before)
	deleted := 0
	if rev <= 1 {
		return 0, nil
	}
	// The cut only moves forward.
	for {
		rctx, cancel := context.WithTimeout(ctx, l.timeout)
		cur, err := l.cli.Get(rctx, l.truncatedKey())
		if err == nil {
			cmp := clientv3.Compare(clientv3.CreateRevision(l.truncatedKey()), "=", 0)
			if len(cur.Kvs) == 1 {
				if old, perr := strconv.ParseInt(string(cur.Kvs[0].Value), 10, 64); perr == nil && old >= rev {
					cancel()
					break
				}
				cmp = clientv3.Compare(clientv3.ModRevision(l.truncatedKey()), "=", cur.Kvs[0].ModRevision)
			}
			var resp *clientv3.TxnResponse
			resp, err = l.cli.Txn(rctx).If(cmp).Then(clientv3.OpPut(l.truncatedKey(), strconv.FormatInt(rev, 10))).Commit()
			if err == nil && resp.Succeeded {
				cancel()
				break
			}
		}
		cancel()
		if err != nil {
			return 0, fmt.Errorf("etcdlog: truncate: record the cut: %w", err)
		}
	}
	for {
		rctx, cancel := context.WithTimeout(ctx, l.timeout)
		resp, err := l.cli.Get(rctx, l.logPrefix(), clientv3.WithPrefix(), clientv3.WithMaxCreateRev(rev-1),
			clientv3.WithLimit(maxOpsPerTxn/2))
		cancel()
		if err != nil {
			return deleted, fmt.Errorf("etcdlog: truncate: %w", err)
		}
		if len(resp.Kvs) == 0 {
			return deleted, nil
		}
		var ops []clientv3.Op
		for _, kv := range resp.Kvs {
			ops = append(ops, clientv3.OpDelete(string(kv.Key)))
			if len(kv.Value) > 1 && kv.Value[1] == 1 {
				if w, n, err := l.parseEntryKey(string(kv.Key)); err == nil {
					ops = append(ops, clientv3.OpDelete(l.prefix+"part/"+w+"/"+fmt.Sprintf("%020d/", n), clientv3.WithPrefix()))
				}
			}
		}
		rctx, cancel = context.WithTimeout(ctx, l.timeout)
		_, err = l.cli.Txn(rctx).Then(ops...).Commit()
		cancel()
		if err != nil {
			return deleted, fmt.Errorf("etcdlog: truncate: %w", err)
		}
		deleted += len(resp.Kvs)
	}
}
