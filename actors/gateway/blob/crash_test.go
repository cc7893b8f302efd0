package blob

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"gatehouse/wal"
	"gatehouse/wal/waltest"
)

// crashChildEnv, when set, makes TestCrashPutThenRecord act as the child:
// it stores blobs and logs records naming them in the data dir the
// variable names, until it is killed.
const crashChildEnv = "GATEHOUSE_BLOB_CRASH_CHILD"

// recBlob is the record type the crash test logs; its payload is the ref.
const recBlob wal.Type = 1

// TestCrashPutThenRecord kills, at a random moment, a child that loops
// "Put a blob, append a WAL record naming it, print the ref" (fsync on),
// then checks the rule the gateway depends on: every record names a blob
// that is present and intact (no dangling reference), every acknowledged
// blob is there, Open removes the temp files the kill left, and the WAL
// passes bbolt's check.
func TestCrashPutThenRecord(t *testing.T) {
	if dir := os.Getenv(crashChildEnv); dir != "" {
		crashChild(dir)
		return
	}
	for round := range 3 {
		t.Run(fmt.Sprint("round ", round), func(t *testing.T) { crashRound(t) })
	}
}

func crashRound(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashPutThenRecord$", "-test.count=1")
	cmd.Env = append(os.Environ(), crashChildEnv+"="+dir)
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start child: %v", err)
	}
	lines := make(chan []string, 1)
	first := make(chan struct{})
	go func() {
		var out []string
		br := bufio.NewReader(stdout)
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				lines <- out // a last line cut short by the kill is dropped
				return
			}
			if out == nil {
				close(first)
			}
			out = append(out, line)
		}
	}()
	select {
	case <-first:
	case <-time.After(20 * time.Second):
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatal("child acknowledged nothing within 20s")
	}
	time.Sleep(time.Duration(rand.N(int64(400 * time.Millisecond))))
	if err := cmd.Process.Kill(); err != nil { // SIGKILL
		t.Fatalf("kill child: %v", err)
	}
	acked := <-lines
	_ = cmd.Wait()

	walPath := filepath.Join(dir, "wal.db")
	waltest.Check(t, walPath)
	l := waltest.Open(t, waltest.WithPath(walPath), waltest.WithSync())
	s, err := Open(Config{Dir: filepath.Join(dir, "blobs")}, nil)
	if err != nil {
		t.Fatalf("Open after the kill: %v", err)
	}
	if ents, _ := os.ReadDir(filepath.Join(dir, "blobs", "tmp")); len(ents) != 0 {
		t.Errorf("Open left %d temp files", len(ents))
	}
	named := 0
	err = l.Replay(0, func(seq uint64, r wal.Record) error {
		ref, err := ParseRef(string(r.Data))
		if err != nil {
			return fmt.Errorf("record %d: %w", seq, err)
		}
		named++
		if err := s.Verify(ref); err != nil {
			t.Errorf("record %d names blob %s: %v (dangling reference)", seq, ref, err)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("Replay = %v", err)
	}
	for _, line := range acked {
		ref, err := ParseRef(line[:len(line)-1])
		if err != nil {
			t.Fatalf("bad ack line %q", line)
		}
		if err := s.Verify(ref); err != nil {
			t.Errorf("acknowledged blob %s: %v", ref, err)
		}
	}
	if len(acked) > named {
		t.Errorf("%d acknowledged, only %d records in the WAL", len(acked), named)
	}
	t.Logf("%d acknowledged, %d records", len(acked), named)
}

// crashChild puts blobs of 1..64 KiB and logs a record for each, with fsync
// on, printing each ref once its record is durable. It exits after 30 s in
// case the parent is gone.
func crashChild(dir string) {
	cfg := wal.DefaultConfig()
	cfg.Path = filepath.Join(dir, "wal.db")
	l, err := wal.Open(cfg, nil, nil)
	if err != nil {
		crashExit("open wal", err)
	}
	s, err := Open(Config{Dir: filepath.Join(dir, "blobs")}, nil)
	if err != nil {
		crashExit("open store", err)
	}
	rng := rand.New(rand.NewPCG(uint64(os.Getpid()), uint64(time.Now().UnixNano())))
	buf := make([]byte, 64<<10)
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); {
		b := buf[:1+rng.IntN(len(buf))]
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		ref, _, err := s.Put(bytes.NewReader(b), int64(len(buf)))
		if err != nil {
			crashExit("put", err)
		}
		if _, err := l.Append(wal.Record{Type: recBlob, Data: []byte(ref.String())}); err != nil {
			crashExit("append", err)
		}
		s.Release(ref)
		if _, err := io.WriteString(os.Stdout, ref.String()+"\n"); err != nil {
			crashExit("write", err)
		}
	}
	os.Exit(3)
}

func crashExit(op string, err error) {
	fmt.Fprintf(os.Stderr, "crash child: %s: %v\n", op, err)
	os.Exit(2)
}
