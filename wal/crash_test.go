package wal_test

import (
	"bufio"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"gatehouse/wal"
	"gatehouse/wal/waltest"
)

// crashChildEnv, when set, makes a TestCrash* test act as the child: it
// appends to the log at the path in the variable until it is killed.
// crashTruncateEnv=1 makes the child also truncate the log as it goes.
const (
	crashChildEnv    = "GATEHOUSE_WAL_CRASH_CHILD"
	crashTruncateEnv = "GATEHOUSE_WAL_CRASH_TRUNCATE"
)

// The child prints one line per acknowledged Append, and one line before
// each TruncateBefore call.
const (
	crashAck      = "ack %d %d %d %d\n" // first last writer call
	crashTruncate = "truncate %d\n"     // seq
)

// TestCrashAppend kills a child process that appends from several
// goroutines at a random moment, then checks that every sequence the child
// saw acknowledged survived with its payload, the log is contiguous, every
// CRC is valid (Open finds nothing bad) and bbolt's tx.Check is clean.
func TestCrashAppend(t *testing.T) { crashTest(t, "^TestCrashAppend$", false) }

// TestCrashAppendTruncate is TestCrashAppend with a child that also keeps
// truncating the log, so the kill can land in the middle of large deletes.
// Acknowledged sequences at or above the highest truncation point ever
// requested must survive.
func TestCrashAppendTruncate(t *testing.T) { crashTest(t, "^TestCrashAppendTruncate$", true) }

func crashTest(t *testing.T, run string, truncate bool) {
	t.Helper()
	if path := os.Getenv(crashChildEnv); path != "" {
		crashChild(path, os.Getenv(crashTruncateEnv) == "1")
		return
	}
	path := filepath.Join(t.TempDir(), "wal.db")
	cmd := exec.Command(os.Args[0], "-test.run="+run, "-test.count=1")
	cmd.Env = append(os.Environ(), crashChildEnv+"="+path, crashTruncateEnv+"=0")
	if truncate {
		cmd.Env[len(cmd.Env)-1] = crashTruncateEnv + "=1"
	}
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatalf("StdoutPipe() = %v", err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start child: %v", err)
	}
	lines := make(chan []string, 1)
	firstAck := make(chan struct{})
	go func() { lines <- readLines(stdout, firstAck) }()

	select {
	case <-firstAck:
	case <-time.After(20 * time.Second):
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatal("child acknowledged nothing within 20s")
	}
	time.Sleep(time.Duration(rand.N(int64(700 * time.Millisecond))))
	if err := cmd.Process.Kill(); err != nil { // SIGKILL
		t.Fatalf("kill child: %v", err)
	}
	out := <-lines
	_ = cmd.Wait() // "signal: killed" is the expected outcome

	waltest.Check(t, path) // before Open could repair anything
	reg := prometheus.NewPedanticRegistry()
	l := waltest.Open(t, waltest.WithPath(path), waltest.WithRegisterer(reg))
	if got := metricValue(t, reg, "gatehouse_wal_corrupt_records"); got != 0 {
		t.Errorf("Open() after SIGKILL found %v corrupt records, want 0", got)
	}
	checkCrashLog(t, l, out)
}

// readLines returns every complete line of r, closing firstAck at the first
// one; a final line cut short by the kill is dropped.
func readLines(r io.Reader, firstAck chan<- struct{}) []string {
	var lines []string
	br := bufio.NewReader(r)
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			return lines
		}
		if lines == nil {
			close(firstAck)
		}
		lines = append(lines, line)
	}
}

// checkCrashLog checks the reopened log against the child's output.
func checkCrashLog(t *testing.T, l *wal.Log, lines []string) {
	t.Helper()
	first, err := l.FirstIndex()
	if err != nil {
		t.Fatalf("FirstIndex() = %v", err)
	}
	stored := map[uint64][]byte{}
	prev := max(first, 1) - 1
	err = l.Replay(prev, func(seq uint64, rec wal.Record) error {
		if seq != prev+1 {
			return fmt.Errorf("index %d after %d: not contiguous", seq, prev)
		}
		prev = seq
		stored[seq] = rec.Data
		return nil
	})
	if err != nil {
		t.Fatalf("Replay(%d) = %v", max(first, 1)-1, err)
	}
	var truncated uint64 // highest truncation point the child requested
	for _, line := range lines {
		var seq uint64
		if _, err := fmt.Sscanf(line, crashTruncate, &seq); err == nil {
			truncated = max(truncated, seq)
		}
	}
	acked := 0
	for _, line := range lines {
		var lo, hi uint64
		var w, i int
		if !strings.HasPrefix(line, "ack ") {
			continue
		}
		if _, err := fmt.Sscanf(line, crashAck, &lo, &hi, &w, &i); err != nil {
			t.Fatalf("bad ack line %q: %v", line, err)
		}
		acked++
		for seq := max(lo, truncated); seq <= hi; seq++ {
			want := crashPayload(w, i, int(seq-lo))
			if got, ok := stored[seq]; !ok || string(got) != want {
				t.Errorf("acknowledged index %d = %q (present %t), want %q", seq, got, ok, want)
			}
		}
	}
	t.Logf("%d acknowledged appends, truncated before <= %d, %d records survived (%d..%d)",
		acked, truncated, len(stored), first, prev)
}

func crashPayload(writer, call, j int) string {
	return fmt.Sprintf("writer %d call %d record %d %s", writer, call, j, strings.Repeat("x", 150))
}

// crashChild appends forever from several goroutines with fsync on and
// prints each acknowledged range; with truncate, it also truncates all but
// the last ~100 records every 20ms. It exits after 30s in case the parent
// is gone.
func crashChild(path string, truncate bool) {
	cfg := wal.DefaultConfig()
	cfg.Path = path
	l, err := wal.Open(cfg, nil, nil)
	if err != nil {
		crashExit("open", err)
	}
	var out sync.Mutex
	emit := func(format string, args ...any) {
		out.Lock()
		defer out.Unlock()
		// One write(2) per line: atomic on a pipe.
		if _, err := fmt.Fprintf(os.Stdout, format, args...); err != nil {
			crashExit("write", err)
		}
	}
	for w := range 8 {
		go func() {
			for i := 0; ; i++ {
				n := 1 + (w+i)%3
				recs := make([]wal.Record, n)
				for j := range recs {
					recs[j] = wal.Record{Type: 1, Data: []byte(crashPayload(w, i, j))}
				}
				last, err := l.Append(recs...)
				if err != nil {
					crashExit("append", err)
				}
				emit(crashAck, last-uint64(n)+1, last, w, i)
			}
		}()
	}
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
		if !truncate {
			continue
		}
		last, err := l.LastIndex()
		if err != nil {
			crashExit("last index", err)
		}
		if last > 100 {
			emit(crashTruncate, last-100)
			if err := l.TruncateBefore(last - 100); err != nil {
				crashExit("truncate", err)
			}
		}
	}
	os.Exit(3)
}

func crashExit(op string, err error) {
	fmt.Fprintf(os.Stderr, "crash child: %s: %v\n", op, err)
	os.Exit(2)
}
