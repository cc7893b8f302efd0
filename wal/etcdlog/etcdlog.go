// Package etcdlog is a write-ahead log kept in etcd, for cluster mode: the
// same contract as the bbolt WAL (an Append is durable when it returns,
// records come back in one total order) with etcd as the replicated,
// linearizable store, so every node of a cluster applies the same records
// in the same order.
//
// # Layout
//
// An Append is one etcd transaction that creates one key,
// {prefix}/log/{writer}/{n}, whose value holds the batch of records. The
// transaction's revision orders the batch among every writer's, and a
// record's sequence number is that revision times 1024 plus its index in
// the batch, so sequence numbers grow with the log's order (they are not
// dense). The key is created only if absent, so a writer that retries an
// Append whose outcome it did not learn writes the batch at most once.
//
// The entry's value: a version byte (2), a byte that says whether the
// batch is inline (0, then the batch) or in parts (1, then uvarints: the
// number of parts, the batch's size; then its CRC-32C, 4 bytes), then the
// entry's MAC (32 bytes, auth.go). Version 1 entries, written before the
// log was authenticated, have no MAC and are refused unless
// Auth.AcceptUnauthenticated.
//
// A batch larger than MaxValue (etcd refuses requests over 1.5 MiB by
// default) is written in parts first, {prefix}/part/{writer}/{n}/{i}, and
// its log entry then lists them: the entry is the commit point, and a part
// with no entry is garbage that Truncate removes.
//
// # Reading
//
// Follow reads the entries after a sequence number in revision order (a
// range read at a revision R), then watches from R+1: snapshot plus
// replay, the way the bbolt WAL's Replay is used at start, continued live.
package etcdlog

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"strconv"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"gatehouse/wal"
)

const (
	// MaxBatch is the most records one Append takes (the index is the low
	// 10 bits of a sequence number).
	MaxBatch  = 1 << indexBits
	indexBits = 10
	// MaxValue is the largest value written in one key; a larger batch is
	// split into parts of this size.
	MaxValue = 1 << 20
	// maxOpsPerTxn is etcd's default limit of operations in a transaction.
	maxOpsPerTxn = 128
	// entryVersion is the first byte of an entry; legacyVersion that of
	// an entry without a MAC.
	entryVersion  = 2
	legacyVersion = 1
)

var (
	// ErrTooMany reports an Append of more than MaxBatch records.
	ErrTooMany = errors.New("etcdlog: too many records in one append")
	// ErrCompacted reports a Follow from a revision etcd has compacted:
	// the follower must restore from a snapshot taken after it.
	ErrCompacted = errors.New("etcdlog: log compacted past the position asked for")
	// ErrCorrupt reports an entry that does not decode.
	ErrCorrupt = errors.New("etcdlog: corrupt entry")
)

// Seq returns the sequence number of record index of the batch committed
// at revision rev.
func Seq(rev int64, index int) uint64 { return uint64(rev)<<indexBits | uint64(index) }

// Rev returns the etcd revision of the batch holding seq.
func Rev(seq uint64) int64 { return int64(seq >> indexBits) }

// Log appends to and follows one log in etcd. Safe for concurrent use.
type Log struct {
	cli     *clientv3.Client
	prefix  string // {prefix}/
	writer  string
	timeout time.Duration
	auth    *authenticator

	mu sync.Mutex
	n  uint64 // the writer's counter
}

// Open returns the log under prefix for writer, a name unique among the
// processes writing to it (the node id). The writer's counter starts after
// the largest this writer left in etcd, so a restarted writer never reuses
// a name. timeout bounds each etcd request. auth authenticates what the
// log writes and checks what it reads (auth.go).
func Open(ctx context.Context, cli *clientv3.Client, prefix, writer string, timeout time.Duration, auth Auth) (*Log, error) {
	if writer == "" || strings.Contains(writer, "/") {
		return nil, fmt.Errorf("etcdlog: writer %q: empty or contains '/'", writer)
	}
	a, err := newAuthenticator(auth)
	if err != nil {
		return nil, err
	}
	l := &Log{cli: cli, prefix: strings.TrimSuffix(prefix, "/") + "/", writer: writer, timeout: timeout, auth: a}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	// The newest of this writer's entries: keys sort by their zero-padded
	// counter.
	resp, err := cli.Get(ctx, l.entryPrefix(), clientv3.WithPrefix(), clientv3.WithKeysOnly(),
		clientv3.WithSort(clientv3.SortByKey, clientv3.SortDescend), clientv3.WithLimit(1))
	if err != nil {
		return nil, fmt.Errorf("etcdlog: open: %w", err)
	}
	if len(resp.Kvs) == 1 {
		n, err := strconv.ParseUint(strings.TrimPrefix(string(resp.Kvs[0].Key), l.entryPrefix()), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%w: key %q", ErrCorrupt, resp.Kvs[0].Key)
		}
		l.n = n
	}
	return l, nil
}

func (l *Log) logPrefix() string   { return l.prefix + "log/" }
func (l *Log) entryPrefix() string { return l.logPrefix() + l.writer + "/" }
func (l *Log) entryKey(n uint64) string {
	return l.entryPrefix() + fmt.Sprintf("%020d", n)
}
func (l *Log) partKey(n uint64, i int) string {
	return l.prefix + "part/" + l.writer + "/" + fmt.Sprintf("%020d/%06d", n, i)
}

// Append writes recs as one batch and returns the sequence number of the
// last. It is durable (a majority of etcd members has it) when it returns
// without error. An error leaves the outcome unknown only when it says so
// (a timeout); Append retries such an outcome itself, under the same name,
// until ctx ends, so a batch is never written twice.
func (l *Log) Append(ctx context.Context, recs ...wal.Record) (uint64, error) {
	if len(recs) == 0 {
		return 0, errors.New("etcdlog: empty append")
	}
	if len(recs) > MaxBatch {
		return 0, fmt.Errorf("%w: %d (at most %d)", ErrTooMany, len(recs), MaxBatch)
	}
	for i, r := range recs {
		if r.Type == 0 {
			return 0, fmt.Errorf("etcdlog: record %d: type 0 is invalid", i)
		}
	}
	body := encodeBatch(recs)
	for range 8 {
		l.mu.Lock()
		l.n++
		n := l.n
		l.mu.Unlock()
		last, err := l.appendAs(ctx, n, body, len(recs))
		if !errors.Is(err, errTaken) {
			return last, err
		}
		// Someone else (not a node: a client of etcd without the master
		// key) created this writer's next name: its entry is refused by
		// every reader, and this batch goes under the next name.
	}
	return 0, fmt.Errorf("etcdlog: append: %w, 8 times", errTaken)
}

// errTaken: a name this writer has not written holds another value.
var errTaken = errors.New("the writer's next key holds a value it did not write")

// appendAs writes body, a batch of count records, as the writer's entry n.
func (l *Log) appendAs(ctx context.Context, n uint64, body []byte, count int) (uint64, error) {
	var entry []byte
	if len(body) <= MaxValue {
		entry = append([]byte{entryVersion, 0}, body...)
	} else {
		parts, err := l.writeParts(ctx, n, body)
		if err != nil {
			return 0, err
		}
		entry = []byte{entryVersion, 1}
		entry = binary.AppendUvarint(entry, uint64(parts))
		entry = binary.AppendUvarint(entry, uint64(len(body)))
		entry = binary.BigEndian.AppendUint32(entry, crc32.Checksum(body, castagnoli))
	}
	if entry[1] == 0 {
		entry = append(entry, l.auth.mac(macEntry, l.writer, n, entry)...)
	} else {
		entry = append(entry, l.auth.mac(macEntry, l.writer, n, entry, body)...)
	}
	rev, err := l.createRetrying(ctx, l.entryKey(n), entry)
	if errors.Is(err, errTaken) {
		return 0, err
	}
	if err != nil {
		return 0, fmt.Errorf("etcdlog: append: %w (outcome unknown)", err)
	}
	return Seq(rev, count-1), nil
}

// createRetrying is create until it answers or ctx ends: an error is an
// unknown outcome (a timeout, a leader change), and trying again under
// the same name is safe, because create tells a landed write from a new
// one.
func (l *Log) createRetrying(ctx context.Context, key string, value []byte) (int64, error) {
	for {
		rev, err := l.create(ctx, key, value)
		if err == nil || ctx.Err() != nil || errors.Is(err, errTaken) {
			return rev, err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// create puts key=value if key does not exist and returns the revision the
// key was created at (the earlier write's, if a previous try landed), or
// errTaken when key holds another value.
func (l *Log) create(ctx context.Context, key string, value []byte) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, l.timeout)
	defer cancel()
	resp, err := l.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, string(value))).
		Else(clientv3.OpGet(key)).
		Commit()
	if err != nil {
		return 0, err
	}
	if resp.Succeeded {
		return resp.Header.Revision, nil
	}
	kvs := resp.Responses[0].GetResponseRange().Kvs
	if len(kvs) != 1 {
		return 0, fmt.Errorf("etcdlog: %s exists and does not", key)
	}
	if !bytes.Equal(kvs[0].Value, value) {
		return 0, fmt.Errorf("%s: %w", key, errTaken)
	}
	return kvs[0].CreateRevision, nil
}

func (l *Log) writeParts(ctx context.Context, n uint64, body []byte) (int, error) {
	parts := (len(body) + MaxValue - 1) / MaxValue
	for i := range parts {
		chunk := body[i*MaxValue : min(len(body), (i+1)*MaxValue)]
		if _, err := l.createRetrying(ctx, l.partKey(n, i), chunk); err != nil {
			if errors.Is(err, errTaken) {
				return 0, err
			}
			return 0, fmt.Errorf("etcdlog: append part %d of %d: %w", i+1, parts, err)
		}
	}
	return parts, nil
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// encodeBatch: uvarint count, then per record type, uvarint length, data;
// then the CRC-32C of all that.
func encodeBatch(recs []wal.Record) []byte {
	size := 4 + binary.MaxVarintLen64
	for _, r := range recs {
		size += 1 + binary.MaxVarintLen64 + len(r.Data)
	}
	b := make([]byte, 0, size)
	b = binary.AppendUvarint(b, uint64(len(recs)))
	for _, r := range recs {
		b = append(b, byte(r.Type))
		b = binary.AppendUvarint(b, uint64(len(r.Data)))
		b = append(b, r.Data...)
	}
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

func decodeBatch(b []byte) ([]wal.Record, error) {
	if len(b) < 4 {
		return nil, fmt.Errorf("%w: %d bytes", ErrCorrupt, len(b))
	}
	body, sum := b[:len(b)-4], binary.BigEndian.Uint32(b[len(b)-4:])
	if crc32.Checksum(body, castagnoli) != sum {
		return nil, fmt.Errorf("%w: checksum", ErrCorrupt)
	}
	n, k := binary.Uvarint(body)
	if k <= 0 || n == 0 || n > MaxBatch {
		return nil, fmt.Errorf("%w: count", ErrCorrupt)
	}
	body = body[k:]
	recs := make([]wal.Record, 0, n)
	for range n {
		if len(body) < 1 {
			return nil, fmt.Errorf("%w: truncated", ErrCorrupt)
		}
		t := wal.Type(body[0])
		size, k := binary.Uvarint(body[1:])
		if k <= 0 || t == 0 || size > uint64(len(body)-1-k) {
			return nil, fmt.Errorf("%w: record", ErrCorrupt)
		}
		data := bytes.Clone(body[1+k : 1+k+int(size)])
		recs = append(recs, wal.Record{Type: t, Data: data})
		body = body[1+k+int(size):]
	}
	if len(body) != 0 {
		return nil, fmt.Errorf("%w: trailing bytes", ErrCorrupt)
	}
	return recs, nil
}
