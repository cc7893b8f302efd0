package wal

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"time"

	"go.etcd.io/bbolt"
)

// maxLostMarkers bounds the TypeLost records one Repair writes: a longer
// run of missing sequences is not bit rot but a file from somewhere else,
// and a backup is the way back.
const maxLostMarkers = 1 << 20

// RepairReport is what Repair found and did.
type RepairReport struct {
	// Backup is the copy of the file taken before the change; "" when
	// nothing needed repairing and the file is untouched.
	Backup string
	// Bad lists every bad entry, in log order. A bad record and a missing
	// sequence in the middle were replaced by a TypeLost record; a stray
	// key was deleted; sequences missing at the end were dropped and
	// numbering goes on after the last record present.
	Bad []BadRecord
	// LastIndex is the log's last index after the repair.
	LastIndex uint64
}

// Repair is the offline repair of the log at cfg.Path, for a process that
// does not hold it (bbolt's lock fails after cfg.OpenTimeout otherwise). It
// refuses a file bbolt's own consistency check rejects, or one holding a
// record of a newer version. Otherwise, if some entry is bad, it first
// copies the file byte for byte to <path>.bak-<UTC time> (fsynced), then in
// one transaction replaces each bad record and each missing sequence with a
// TypeLost record, deletes stray keys and fixes the stored last index. It
// never deletes or changes a record that verifies. lg may be nil.
func Repair(cfg Config, lg *slog.Logger) (RepairReport, error) {
	if err := cfg.Validate(); err != nil {
		return RepairReport{}, err
	}
	if lg == nil {
		lg = slog.New(slog.DiscardHandler)
	}
	lg = lg.With("component", "wal")
	if _, err := os.Stat(cfg.Path); err != nil {
		return RepairReport{}, fmt.Errorf("repair %s: %w", cfg.Path, err)
	}
	db, err := bbolt.Open(cfg.Path, 0o600, &bbolt.Options{Timeout: cfg.OpenTimeout, NoFreelistSync: true})
	if err != nil {
		return RepairReport{}, fmt.Errorf("repair %s: open (is a server using it?): %w", cfg.Path, err)
	}
	defer func() { _ = db.Close() }()
	var c check
	err = db.View(func(tx *bbolt.Tx) error {
		if cerr := checkPages(tx); cerr != nil {
			return cerr
		}
		logb, meta := tx.Bucket(bucketLog), tx.Bucket(bucketMeta)
		if logb == nil || meta == nil {
			return fmt.Errorf("no %q and %q buckets: not a gatehouse log", bucketLog, bucketMeta)
		}
		var verr error
		c, verr = verify(logb, meta)
		return verr
	})
	if err != nil {
		return RepairReport{}, fmt.Errorf("repair %s: %w", cfg.Path, err)
	}
	rep := RepairReport{Bad: c.bad, LastIndex: c.lastKey}
	if c.lastKey == 0 && c.metaErr == nil {
		rep.LastIndex = c.stored
	}
	if len(c.bad) == 0 && c.metaErr == nil && c.stored >= c.lastKey {
		rep.LastIndex = c.stored
		return rep, nil
	}
	if n := lostMarkers(c); n > maxLostMarkers {
		return RepairReport{}, fmt.Errorf("repair %s: %d sequences to replace, more than %d: not bit rot; restore the file from a backup", cfg.Path, n, maxLostMarkers)
	}
	if rep.Backup, err = backup(cfg.Path, time.Now()); err != nil {
		return RepairReport{}, fmt.Errorf("repair %s: %w", cfg.Path, err)
	}
	if err := db.Update(func(tx *bbolt.Tx) error { return fix(tx, c, time.Now()) }); err != nil {
		return RepairReport{}, fmt.Errorf("repair %s (the copy %s is intact): %w", cfg.Path, rep.Backup, err)
	}
	lg.Warn("repaired", "path", cfg.Path, "backup", rep.Backup, "bad", len(c.bad), "last_index", rep.LastIndex)
	return rep, nil
}

// checkPages runs bbolt's own consistency check.
func checkPages(tx *bbolt.Tx) error {
	var errs []error
	for err := range tx.Check() {
		errs = append(errs, err)
		if len(errs) == 10 {
			break
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("bbolt consistency check failed, beyond what a record repair can fix (restore the file from a backup): %w", err)
	}
	return nil
}

// lostMarkers counts the TypeLost records fix would write.
func lostMarkers(c check) uint64 {
	var n uint64
	for _, b := range c.bad {
		if !b.Stray && b.Index <= c.lastKey {
			n += b.Through - b.Index + 1
		}
	}
	return n
}

// fix applies c's repairs in tx and checks that the log then verifies.
func fix(tx *bbolt.Tx, c check, now time.Time) error {
	logb, meta := tx.Bucket(bucketLog), tx.Bucket(bucketMeta)
	if err := deleteStrays(logb, c.bad); err != nil {
		return err
	}
	for _, b := range c.bad {
		if b.Stray || b.Index > c.lastKey { // the tail: nothing after it to keep in place
			continue
		}
		for seq := b.Index; seq <= b.Through && seq != 0; seq++ {
			if err := logb.Put(appendKey(nil, seq), lostRecord(seq, b, now)); err != nil {
				return fmt.Errorf("put lost marker at %d: %w", seq, err)
			}
		}
	}
	last := c.lastKey
	if last == 0 && c.metaErr == nil {
		last = c.stored // an empty log keeps its numbering (truncated whole)
	}
	if err := putLast(meta, nil, last); err != nil {
		return fmt.Errorf("put last index: %w", err)
	}
	after, err := verify(logb, meta)
	switch {
	case err != nil:
		return fmt.Errorf("verify after repair: %w", err)
	case len(after.bad) > 0:
		return &CorruptError{Path: "after repair", Bad: after.bad}
	}
	return nil
}

// deleteStrays deletes every stray key by its position in cursor order,
// last first so the earlier positions hold: a key whose bits flipped may
// sit out of order in its page, or repeat a valid key, where a seek by key
// would find the wrong entry.
func deleteStrays(logb *bbolt.Bucket, bad []BadRecord) error {
	for i := len(bad) - 1; i >= 0; i-- {
		b := bad[i]
		if !b.Stray {
			continue
		}
		c := logb.Cursor()
		k, v := c.First()
		for n := 0; n < b.pos && k != nil; n++ {
			k, v = c.Next()
		}
		if !bytes.Equal(k, b.Key) {
			return fmt.Errorf("delete stray key %x: found %x at its position %d", b.Key, k, b.pos)
		}
		var err error
		if v == nil {
			err = logb.DeleteBucket(k)
		} else {
			err = c.Delete()
		}
		if err != nil {
			return fmt.Errorf("delete stray key %x: %w", b.Key, err)
		}
	}
	return nil
}

// lostRecord is the TypeLost envelope stored at seq in place of b.
func lostRecord(seq uint64, b BadRecord, now time.Time) []byte {
	p := make([]byte, 0, lostPayloadSize)
	p = append(p, byte(b.Type))
	p = binary.BigEndian.AppendUint32(p, uint32(min(b.Size, math.MaxUint32)))
	p = binary.BigEndian.AppendUint64(p, uint64(now.Unix()))
	return appendRecord(nil, seq, Record{Type: TypeLost, Data: p})
}

// lostPayloadSize is a TypeLost payload's size: type(1) | size(4) | time(8).
const lostPayloadSize = 13

// backup copies the file at path to path.bak-<now, UTC>, fsyncs the copy
// and the directory, and returns the copy's path. An existing name is never
// overwritten.
func backup(path string, now time.Time) (string, error) {
	src, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("backup: %w", err)
	}
	defer src.Close()
	name := path + ".bak-" + now.UTC().Format("20060102T150405Z")
	dst, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	for n := 2; errors.Is(err, fs.ErrExist) && n < 100; n++ {
		name = fmt.Sprintf("%s.bak-%s-%d", path, now.UTC().Format("20060102T150405Z"), n)
		dst, err = os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	}
	if err != nil {
		return "", fmt.Errorf("backup: %w", err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		dst.Close()
		return "", fmt.Errorf("backup to %s: %w", name, err)
	}
	if err := dst.Sync(); err != nil {
		dst.Close()
		return "", fmt.Errorf("backup to %s: %w", name, err)
	}
	if err := dst.Close(); err != nil {
		return "", fmt.Errorf("backup to %s: %w", name, err)
	}
	if err := syncDir(filepath.Dir(name)); err != nil {
		return "", fmt.Errorf("backup to %s: %w", name, err)
	}
	return name, nil
}

// syncDir fsyncs dir, so a file created in it survives a crash.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
