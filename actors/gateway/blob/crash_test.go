//go:build unix

package blob

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"gatehouse/wal"
	"gatehouse/wal/waltest"
)

// The crash tests re-execute the test binary as a child running
// TestCrashHelperProcess, which is killed with SIGKILL: by itself from
// testHookBeforeRename, or by the parent at a random moment. The parent
// then reopens the data dir the way a restart would.
const (
	crashModeEnv = "GATEHOUSE_BLOB_CRASH_MODE" // "before-rename", "before-record" or "loop"
	crashDirEnv  = "GATEHOUSE_BLOB_CRASH_DIR"

	crashContents = 512      // distinct blob contents, so Puts often deduplicate
	crashLimit    = 64 << 10 // the largest blob
	crashWriters  = 2
)

// recBlob is the record type the child logs; its payload is the ref.
const recBlob wal.Type = 1

// crashBlob returns content k: 1 B to 64 KiB of pseudo-random bytes.
func crashBlob(k int) []byte { return payload(uint64(k), 1+k*7919%crashLimit) }

// crashNamed reports whether the child may name content k in a record;
// the others are only ever put and abandoned, so Collect removes them while
// other Puts of the same bytes deduplicate against them.
func crashNamed(k int) bool { return k%4 != 0 }

func crashPaths(dir string) (walPath, blobDir string) {
	return filepath.Join(dir, "wal.db"), filepath.Join(dir, "blobs")
}

// TestCrashHelperProcess is the child's body; it does nothing in a normal run.
func TestCrashHelperProcess(t *testing.T) {
	mode := os.Getenv(crashModeEnv)
	if mode == "" {
		t.Skip("child process of the crash tests")
	}
	dir := os.Getenv(crashDirEnv)
	switch mode {
	case "before-rename":
		_, blobDir := crashPaths(dir)
		s, err := New(Config{Dir: blobDir}, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		testHookBeforeRename = func() {
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
			time.Sleep(time.Minute) // the signal is on its way
		}
		_, _, err = s.Put(bytes.NewReader(crashBlob(1)), crashLimit)
		t.Fatalf("Put() returned %v after the hook; the hook should have killed the process", err)
	case "before-record":
		crashBeforeRecord(dir)
	case "loop":
		crashLoop(dir)
	default:
		t.Fatalf("unknown mode %q", mode)
	}
}

// crashOpen opens the child's WAL (fsync on) and store, or exits.
func crashOpen(dir string) (*wal.Log, *Store) {
	walPath, blobDir := crashPaths(dir)
	cfg := wal.DefaultConfig()
	cfg.Path = walPath
	l, err := wal.Open(cfg, nil, nil)
	if err != nil {
		crashExit("open wal", err)
	}
	s, err := New(Config{Dir: blobDir}, nil, nil)
	if err != nil {
		crashExit("open store", err)
	}
	return l, s
}

// crashBeforeRecord puts content 1 and appends a record naming it, then
// puts content 2 and kills itself before appending that one's record.
func crashBeforeRecord(dir string) {
	l, s := crashOpen(dir)
	ref, _, err := s.Put(bytes.NewReader(crashBlob(1)), crashLimit)
	if err != nil {
		crashExit("put", err)
	}
	if _, err := l.Append(wal.Record{Type: recBlob, Data: []byte(ref.String())}); err != nil {
		crashExit("append", err)
	}
	s.Release(ref)
	if _, _, err := s.Put(bytes.NewReader(crashBlob(2)), crashLimit); err != nil {
		crashExit("put", err)
	}
	_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	time.Sleep(time.Minute) // the signal is on its way
}

// crashLoop follows the gateway's protocol until killed (or for 30 s, in
// case the parent is gone), with fsync on: writers Put a blob, check it is
// there while held, and either abandon it (Release) or append a record
// naming it, apply it, Release it and print "ack <ref>"; a collector takes
// snapshots (Cut, capture the applied refs, Collect) every few
// milliseconds.
func crashLoop(dir string) {
	l, s := crashOpen(dir)
	var (
		mu    sync.Mutex
		named = map[Ref]bool{} // the applied state
		out   sync.Mutex
	)
	emit := func(format string, args ...any) {
		out.Lock()
		defer out.Unlock()
		// One write(2) per line: atomic on a pipe; os.Stdout is unbuffered.
		if _, err := fmt.Fprintf(os.Stdout, format, args...); err != nil {
			crashExit("write", err)
		}
	}
	for range crashWriters {
		go func() {
			for {
				k := rand.IntN(crashContents)
				ref, _, err := s.Put(bytes.NewReader(crashBlob(k)), crashLimit)
				if err != nil {
					crashExit("put", err)
				}
				if err := s.Verify(ref); err != nil {
					crashExit("held blob", err)
				}
				if !crashNamed(k) || rand.IntN(4) == 0 {
					s.Release(ref) // abandoned upload
					continue
				}
				if _, err := l.Append(wal.Record{Type: recBlob, Data: []byte(ref.String())}); err != nil {
					crashExit("append", err)
				}
				mu.Lock()
				named[ref] = true
				mu.Unlock()
				s.Release(ref)
				emit("ack %s\n", ref)
			}
		}()
	}
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); {
		time.Sleep(time.Duration(rand.IntN(5)) * time.Millisecond)
		c := s.Cut() // before the barrier
		mu.Lock()    // the capture
		snap := maps.Clone(named)
		mu.Unlock()
		n, err := s.Collect(c, func(r Ref) bool { return snap[r] })
		if err != nil {
			crashExit("collect", err)
		}
		emit("collect %d\n", n)
	}
	os.Exit(3)
}

func crashExit(op string, err error) {
	fmt.Fprintf(os.Stderr, "crash child: %s: %v\n", op, err)
	os.Exit(2)
}

// startChild starts the helper in mode on dir; it returns the child and a
// channel that receives every complete line it printed once it is dead.
func startChild(tb testing.TB, mode, dir string) (*exec.Cmd, <-chan []string, <-chan struct{}, *bytes.Buffer) {
	tb.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashHelperProcess$", "-test.count=1", "-test.timeout=1m")
	cmd.Env = append(os.Environ(), crashModeEnv+"="+mode, crashDirEnv+"="+dir)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err = cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = cmd.Process.Kill() }) // no-op once it has exited
	lines := make(chan []string, 1)
	first := make(chan struct{})
	go func() {
		var out []string
		br := bufio.NewReader(stdout)
		for {
			line, err := br.ReadString('\n')
			if err != nil { // a last line cut short by the kill is dropped
				lines <- out
				return
			}
			if out == nil {
				close(first)
			}
			out = append(out, line)
		}
	}()
	return cmd, lines, first, &stderr
}

// waitKilled waits for the child and fails unless SIGKILL ended it.
func waitKilled(tb testing.TB, cmd *exec.Cmd, stderr *bytes.Buffer) {
	tb.Helper()
	err := cmd.Wait()
	ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus)
	if !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		tb.Fatalf("child ended with %v, want SIGKILL; stderr:\n%s", err, stderr)
	}
}

// TestCrashBeforeRename: a Put killed between writing its temp file and
// renaming it leaves only that temp file, complete and synced, and no blob;
// the next New removes it and the blobs put before are intact.
func TestCrashBeforeRename(t *testing.T) {
	dir := t.TempDir()
	_, blobDir := crashPaths(dir)
	before := newFixture(t, blobDir).put(t, []byte("put before the crash"))

	cmd, lines, _, stderr := startChild(t, "before-rename", dir)
	<-lines
	waitKilled(t, cmd, stderr)

	tmps := tempFiles(t, blobDir)
	if len(tmps) != 1 || !strings.HasPrefix(tmps[0], tmpPrefix) {
		t.Fatalf("temp files after the crash = %v, want one %s*", tmps, tmpPrefix)
	}
	fi, err := os.Stat(filepath.Join(blobDir, tmpDir, tmps[0]))
	if want := int64(len(crashBlob(1))); err != nil || fi.Size() != want {
		t.Errorf("temp file = %v, %v, want %d bytes (complete)", fi, err, want)
	}
	fx := newFixture(t, blobDir)
	if got := tempFiles(t, blobDir); len(got) != 0 {
		t.Errorf("temp files after New = %v, want none", got)
	}
	if err := fx.Verify(before); err != nil {
		t.Errorf("Verify(put before the crash) = %v", err)
	}
	if err := fx.Verify(Ref(sha256.Sum256(crashBlob(1)))); !errors.Is(err, ErrNotFound) {
		t.Errorf("Verify(killed before its rename) = %v, want ErrNotFound", err)
	}
	if got := files(t, blobDir); len(got) != 1 {
		t.Errorf("files after New = %v, want the one blob put before", got)
	}
}

// TestCrashBeforeRecord: a kill between a Put and the append of its record
// leaves the blob durable but named by nothing, and the first snapshot
// after the restart collects it; the blob named before stays.
func TestCrashBeforeRecord(t *testing.T) {
	dir := t.TempDir()
	walPath, blobDir := crashPaths(dir)
	cmd, lines, _, stderr := startChild(t, "before-record", dir)
	<-lines
	waitKilled(t, cmd, stderr)

	waltest.Check(t, walPath)
	recorded := recordedRefs(t, waltest.Open(t, waltest.WithPath(walPath), waltest.WithSync()))
	named, unnamed := Ref(sha256.Sum256(crashBlob(1))), Ref(sha256.Sum256(crashBlob(2)))
	if len(recorded) != 1 || recorded[named] == 0 {
		t.Fatalf("records name %v, want only %s", slices.Collect(maps.Keys(recorded)), named)
	}
	fx := newFixture(t, blobDir)
	for _, r := range []Ref{named, unnamed} {
		if err := fx.Verify(r); err != nil {
			t.Errorf("Verify(%s) after the kill = %v, want it durable", r, err)
		}
	}
	removed, err := fx.Collect(fx.Cut(), func(r Ref) bool { return recorded[r] != 0 })
	if err != nil || removed != 1 {
		t.Errorf("Collect() after the restart = %d, %v, want 1 (the unnamed blob)", removed, err)
	}
	if err := fx.Verify(unnamed); !errors.Is(err, ErrNotFound) {
		t.Errorf("Verify(unnamed) after Collect = %v, want ErrNotFound", err)
	}
	if err := fx.Verify(named); err != nil {
		t.Errorf("Verify(named) after Collect = %v", err)
	}
}

// TestCrashPutThenRecord kills the looping child at a random moment, then
// checks what the gateway depends on: every WAL record names a blob that is
// present and intact (no dangling reference), every acknowledged blob is
// there, New removes the temp files the kill left, the WAL passes bbolt's
// check, and a first snapshot after the restart leaves exactly the named
// blobs.
func TestCrashPutThenRecord(t *testing.T) {
	for round := range 3 {
		t.Run(fmt.Sprint("round_", round), crashRound)
	}
}

func crashRound(t *testing.T) {
	dir := t.TempDir()
	walPath, blobDir := crashPaths(dir)
	cmd, lines, first, stderr := startChild(t, "loop", dir)
	select {
	case <-first:
	case <-time.After(20 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatalf("child printed nothing within 20s; stderr:\n%s", stderr)
	}
	time.Sleep(rand.N(300 * time.Millisecond))
	if err := cmd.Process.Kill(); err != nil { // SIGKILL
		t.Fatalf("kill child: %v", err)
	}
	out := <-lines
	waitKilled(t, cmd, stderr)

	leftover := len(tempFiles(t, blobDir))
	waltest.Check(t, walPath) // before Open could change anything
	l := waltest.Open(t, waltest.WithPath(walPath), waltest.WithSync())
	fx := newFixture(t, blobDir)
	if got := tempFiles(t, blobDir); len(got) != 0 {
		t.Errorf("temp files after New = %v, want none", got)
	}
	recorded := recordedRefs(t, l)
	for ref, seq := range recorded {
		if err := fx.Verify(ref); err != nil {
			t.Errorf("record %d names blob %s: %v (dangling reference)", seq, ref, err)
		}
	}
	acked, collected := parseCrashOutput(t, out)
	for _, ref := range acked {
		if _, ok := recorded[ref]; !ok {
			t.Errorf("acknowledged ref %s has no record", ref)
		}
		if err := fx.Verify(ref); err != nil {
			t.Errorf("acknowledged blob %s: %v", ref, err)
		}
	}
	// The first snapshot after the restart keeps exactly the named blobs.
	if _, err := fx.Collect(fx.Cut(), func(r Ref) bool { _, ok := recorded[r]; return ok }); err != nil {
		t.Fatalf("Collect() after the restart = %v", err)
	}
	if got := len(files(t, blobDir)); got != len(recorded) {
		t.Errorf("%d blobs after the first Collect, want the %d named by records", got, len(recorded))
	}
	if got := fx.metric(t, "gatehouse_blob_corrupt_total", ""); got != 0 {
		t.Errorf("corrupt_total = %v, want 0", got)
	}
	t.Logf("%d acknowledged, %d distinct refs recorded, %d collected by the child, %d temp files left by the kill",
		len(acked), len(recorded), collected, leftover)
}

// recordedRefs returns each ref the log's records name, with the sequence
// of its first record.
func recordedRefs(t *testing.T, l *wal.Log) map[Ref]uint64 {
	t.Helper()
	refs := map[Ref]uint64{}
	err := l.Replay(0, func(seq uint64, rec wal.Record) error {
		if rec.Type != recBlob {
			return fmt.Errorf("record %d has type %d, want %d", seq, rec.Type, recBlob)
		}
		ref, err := ParseRef(string(rec.Data))
		if err != nil {
			return fmt.Errorf("record %d: %w", seq, err)
		}
		if _, ok := refs[ref]; !ok {
			refs[ref] = seq
		}
		return nil
	})
	if err != nil {
		t.Fatalf("Replay(0) = %v", err)
	}
	return refs
}

// parseCrashOutput returns the acknowledged refs and the number of blobs
// the child's collections removed.
func parseCrashOutput(t *testing.T, out []string) (acked []Ref, collected int) {
	t.Helper()
	for _, line := range out {
		var n int
		if _, err := fmt.Sscanf(line, "collect %d\n", &n); err == nil {
			collected += n
			continue
		}
		s, ok := strings.CutPrefix(strings.TrimSuffix(line, "\n"), "ack ")
		ref, err := ParseRef(s)
		if !ok || err != nil {
			t.Fatalf("child printed %q", line)
		}
		acked = append(acked, ref)
	}
	return slices.Clip(acked), collected
}
