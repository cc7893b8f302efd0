//go:build unix

package snapshot

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// The crash tests re-execute the test binary as a child running
// TestCrashHelperProcess, which Saves snapshots until it is killed with
// SIGKILL: by itself from testHookBeforeRename, or by the parent at a random
// moment. The parent then reopens the directory the way a restart would.
const (
	crashModeEnv = "GATEHOUSE_SNAPSHOT_CRASH_MODE" // "before-rename" or "loop"
	crashDirEnv  = "GATEHOUSE_SNAPSHOT_CRASH_DIR"
	crashRetain  = 2
)

// crashPayload is the payload the child saves at idx: 64 KiB to 1 MiB, so a
// Save takes long enough for kills to land inside it.
func crashPayload(idx uint64) []byte {
	return payloadFor(idx, 64<<10+int(idx*7919%(960<<10)))
}

// TestCrashHelperProcess is the child's body; it does nothing in a normal run.
func TestCrashHelperProcess(t *testing.T) {
	mode := os.Getenv(crashModeEnv)
	if mode == "" {
		t.Skip("child process of the crash tests")
	}
	s, err := New(Config{Dir: os.Getenv(crashDirEnv), Retain: crashRetain}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	switch mode {
	case "before-rename":
		testHookBeforeRename = func() {
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
			time.Sleep(time.Minute) // the signal is on its way
		}
		_, err = s.Save(2, writeChunks(crashPayload(2), 4096))
		t.Fatalf("Save(2) returned %v after the hook; the hook should have killed the process", err)
	case "loop":
		for idx := uint64(1); ; idx++ {
			if _, err = s.Save(idx, writeChunks(crashPayload(idx), 4096)); err != nil {
				t.Fatalf("Save(%d) = %v", idx, err)
			}
			fmt.Printf("saved %d\n", idx) // os.Stdout is unbuffered: printed means acknowledged
		}
	default:
		t.Fatalf("unknown mode %q", mode)
	}
}

// startChild starts the helper in mode on dir; its stdout is returned.
func startChild(tb testing.TB, mode, dir string) (*exec.Cmd, *bufio.Scanner, *bytes.Buffer) {
	tb.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashHelperProcess$", "-test.count=1", "-test.timeout=2m")
	cmd.Env = append(os.Environ(), crashModeEnv+"="+mode, crashDirEnv+"="+dir)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err = cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = cmd.Process.Kill() }) // no-op once it has exited
	return cmd, bufio.NewScanner(out), &stderr
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

func TestCrashBeforeRename(t *testing.T) {
	dir := t.TempDir()
	parent := newFixture(t, dir, crashRetain)
	parent.save(t, 1, crashPayload(1))

	cmd, out, stderr := startChild(t, "before-rename", dir)
	for out.Scan() { // drain until the child dies
	}
	waitKilled(t, cmd, stderr)

	tmps := tempFiles(t, dir)
	if len(tmps) != 1 || !strings.HasPrefix(tmps[0], fmt.Sprintf("%016x-", 2)) {
		t.Fatalf("temp files after the crash = %v, want one for index 2", tmps)
	}
	fi, err := os.Stat(filepath.Join(dir, tmps[0]))
	if want := int64(overhead + len(crashPayload(2))); err != nil || fi.Size() != want {
		t.Errorf("temp file size = %v, %v, want %d (complete and synced)", fi, err, want)
	}
	fx := newFixture(t, dir, crashRetain)
	got, err := fx.List()
	if err != nil || !slices.Equal(got, []uint64{1}) {
		t.Errorf("List() after the crash = %v, %v, want [1]: no partial .snap", got, err)
	}
	checkLoads(t, fx, 1, crashPayload(1))
	if diff := cmp.Diff([]string{snapName(1)}, dirNames(t, dir)); diff != "" {
		t.Errorf("dir after Load: temp file removed, nothing broken (-want +got):\n%s", diff)
	}
}

func TestCrashDuringSaveLoop(t *testing.T) {
	for round := range 3 {
		dir := t.TempDir()
		lines := rand.IntN(5)                  // acknowledged saves to wait for; 0: kill during start-up or the first Save
		delay := rand.N(15 * time.Millisecond) // then kill at a random point of a later Save
		cmd, out, stderr := startChild(t, "loop", dir)
		kill := func() {
			time.Sleep(delay)
			_ = cmd.Process.Kill()
		}
		if lines == 0 {
			delay = rand.N(60 * time.Millisecond)
			kill()
		}
		var saved []uint64
		for out.Scan() {
			idx, err := strconv.ParseUint(strings.TrimPrefix(out.Text(), "saved "), 10, 64)
			if err != nil {
				t.Fatalf("child printed %q", out.Text())
			}
			if saved = append(saved, idx); len(saved) == lines {
				kill()
			}
		}
		waitKilled(t, cmd, stderr)
		loaded := checkAfterCrash(t, dir, saved)
		t.Logf("round %d: killed %v after %d acknowledged saves; child printed %v; Load found %d", round, delay, lines, saved, loaded)
	}
}

// checkAfterCrash asserts that a restart on dir loads the last acknowledged
// snapshot or the one after it (renamed but not yet acknowledged), intact,
// and finds nothing broken.
func checkAfterCrash(tb testing.TB, dir string, saved []uint64) (loaded uint64) {
	tb.Helper()
	last := uint64(0)
	if len(saved) > 0 {
		last = saved[len(saved)-1]
	}
	fx := newFixture(tb, dir, crashRetain)
	if idxs, err := fx.List(); err != nil || len(idxs) > crashRetain+1 {
		tb.Errorf("List() = %v, %v, want at most %d snapshots", idxs, err, crashRetain+1)
	}
	idx, err := fx.Load(func(idx uint64, p []byte) error {
		if !bytes.Equal(p, crashPayload(idx)) {
			return fmt.Errorf("index %d: payload differs from the one saved", idx)
		}
		return nil
	})
	switch {
	case last == 0 && errors.Is(err, ErrNoSnapshot):
	case err != nil:
		tb.Errorf("Load() = %v, want the snapshot of index %d or %d", err, last, last+1)
	case idx != last && idx != last+1:
		tb.Errorf("Load() = %d, want %d (last acknowledged) or %d (renamed, not yet acknowledged)", idx, last, last+1)
	}
	if got := fx.metric(tb, "gatehouse_snapshot_broken_total"); got != 0 {
		tb.Errorf("broken_total = %v, want 0: a crash must never leave a broken .snap", got)
	}
	if got := tempFiles(tb, dir); len(got) != 0 {
		tb.Errorf("temp files after Load = %v, want none", got)
	}
	return idx
}
