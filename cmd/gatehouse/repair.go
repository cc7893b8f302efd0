package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"gatehouse/actors"
	"gatehouse/actors/accounts"
	"gatehouse/actors/keys"
	"gatehouse/snapshot"
	"gatehouse/wal"
)

// repairHelp is gatehouse repair -h.
const repairHelp = `usage: gatehouse repair [flags]

Repairs the data dir's write-ahead log (wal.db) after start-up refused it
for a corrupt record. Run it with the server stopped, on the server's data
dir (--data-dir or --config as the server was started). It first copies
wal.db to wal.db.bak-<UTC time>, then replaces only the bad records (and
deletes stray keys), keeps every record that verifies, and prints what was
lost: each record's index, its type and what can be read of it without
secrets. The next start replays every intact record. A log with nothing to
repair is left untouched.`

// corruptWALHint completes start-up's error for a corrupt WAL: the command
// that repairs it.
func corruptWALHint(err error, dataDir string) error {
	if _, ok := errors.AsType[*wal.CorruptError](err); !ok {
		return err
	}
	return fmt.Errorf("%w\nthe write-ahead log has corrupt records (bit rot or tampering, not a crash: its commits are atomic); "+
		"nothing was changed. To repair it, run: gatehouse repair --data-dir %s\n"+
		"(it keeps a copy of wal.db, removes only the bad records and lists what they held)", err, dataDir)
}

// repairWAL is gatehouse repair: wal.Repair on the data dir's wal.db under
// the data dir's lock, and its report on stdout.
func repairWAL(cfg fileConfig, stdout io.Writer) error {
	path := filepath.Join(cfg.DataDir, "wal.db")
	if _, err := os.Stat(path); err != nil {
		return fmt.Errorf("repair: %s holds no gatehouse data (no wal.db): give the server's data dir with --data-dir, GATEHOUSE_DATA_DIR or --config", cfg.DataDir)
	}
	unlock, err := lockDataDir(cfg.DataDir)
	if err != nil {
		return fmt.Errorf("repair: %w: stop it first", err)
	}
	defer unlock()
	wcfg := wal.DefaultConfig()
	wcfg.Path = path
	rep, err := wal.Repair(wcfg, nil)
	if err != nil {
		return err
	}
	if rep.Backup == "" {
		fmt.Fprintf(stdout, "%s: nothing to repair (last index %d)\n", path, rep.LastIndex)
		return nil
	}
	snap := newestSnapshot(cfg.DataDir)
	fmt.Fprintf(stdout, "repaired %s\ncopy of it before the repair: %s\n", path, rep.Backup)
	lost := 0
	for _, b := range rep.Bad {
		line, n := describeBad(b, snap)
		lost += n
		fmt.Fprintln(stdout, line)
	}
	fmt.Fprintf(stdout, "%d record(s) lost, every other record kept; last index %d. Start the server as before.\n", lost, rep.LastIndex)
	return nil
}

// describeBad is one line of the report for b and the records it lost
// (none if the snapshot at index snap covers them).
func describeBad(b wal.BadRecord, snap uint64) (string, int) {
	var line string
	n := 0
	switch {
	case b.Stray:
		return fmt.Sprintf("deleted stray key %x (%d-byte value, %s): no record lost", b.Key, b.Size, b.Reason), 0
	case b.Missing:
		line = fmt.Sprintf("lost indexes %d-%d: %s", b.Index, b.Through, b.Reason)
		if b.Index == b.Through {
			line = fmt.Sprintf("lost index %d: %s", b.Index, b.Reason)
		}
		n = int(min(b.Through-b.Index+1, 1<<30))
	default:
		line = fmt.Sprintf("lost index %d: %s (%d bytes; %s)", b.Index, actors.DescribeRecord(b.Type, b.Payload, keys.DescribeRecord, accounts.DescribeRecord), b.Size, b.Reason)
		n = 1
	}
	if snap >= b.Through {
		return line + fmt.Sprintf("; the snapshot at index %d covers it: not needed", snap), 0
	}
	return line, n
}

// newestSnapshot is the index of the newest snapshot file in the data dir
// (unvalidated), or 0.
func newestSnapshot(dataDir string) uint64 {
	dir := filepath.Join(dataDir, "snap")
	if _, err := os.Stat(dir); err != nil {
		return 0
	}
	st, err := snapshot.New(snapshot.Config{Dir: dir, Retain: 1}, nil, nil)
	if err != nil {
		return 0
	}
	idxs, err := st.List()
	if err != nil || len(idxs) == 0 {
		return 0
	}
	return idxs[0]
}
