package transport

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// One transport per process (see the package comment): the owner runs in
// a child process, this test binary started again with ownerEnv set.
const ownerEnv = "GATEHOUSE_TRANSPORT_OWNER"

var (
	local     *Transport // this process's transport, the forwarder
	ownerAddr string     // the child's
)

func TestMain(m *testing.M) {
	if os.Getenv(ownerEnv) == "1" {
		runOwner()
		return
	}
	if files := os.Getenv(tlsNodeEnv); files != "" {
		runTLSNode(files)
		return
	}
	os.Exit(run(m))
}

func run(m *testing.M) int {
	child := exec.Command(os.Args[0])
	child.Env = append(os.Environ(), ownerEnv+"=1")
	stdin, _ := child.StdinPipe()
	stdout, _ := child.StdoutPipe()
	child.Stderr = os.Stderr
	if err := child.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "start owner process:", err)
		return 1
	}
	defer child.Wait()
	defer stdin.Close() // the owner exits when its stdin closes
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		fmt.Fprintln(os.Stderr, "owner process address:", err)
		return 1
	}
	ownerAddr = strings.TrimSpace(line)
	local, err = Start("127.0.0.1:0", &countingAdmitter{}, time.Second, quietLogger())
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer local.Close()
	return m.Run()
}

func runOwner() {
	tr, err := Start("127.0.0.1:0", &countingAdmitter{}, time.Second, quietLogger())
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if err := tr.Handle("echo", echoService); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println(tr.Addr())
	io.Copy(io.Discard, os.Stdin)
	tr.Close()
}

// countingAdmitter admits everything; Remaining counts down with each
// admission, so the forwarder sees how many the owner ran. Key "slow"
// takes 200 ms, key "revoked" is refused; a key named "notyet…" is
// answered "not the owner", then "unavailable", then admitted (a shard
// the owner is still taking).
type countingAdmitter struct {
	calls  atomic.Int64
	mu     sync.Mutex
	notyet map[string]int
}

func (c *countingAdmitter) AdmitOwned(ctx context.Context, keyID string) Verdict {
	if strings.HasPrefix(keyID, "notyet") {
		c.mu.Lock()
		if c.notyet == nil {
			c.notyet = map[string]int{}
		}
		c.notyet[keyID]++
		n := c.notyet[keyID]
		c.mu.Unlock()
		switch n {
		case 1:
			return Verdict{Code: NotOwner}
		case 2:
			return Verdict{Code: Unavailable}
		}
	}
	n := c.calls.Add(1)
	switch keyID {
	case "slow":
		time.Sleep(200 * time.Millisecond)
	case "revoked":
		return Verdict{Code: KeyRevoked}
	}
	return Verdict{Code: Admitted, Limit: 1 << 40, Remaining: 1<<40 - n, Reset: 1700000000}
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

var reqIDs atomic.Uint64

func newID() uint64 { return reqIDs.Add(1) }

func TestForward(t *testing.T) {
	ctx := context.Background()
	id := newID()
	v, err := local.Forward(ctx, ownerAddr, "key-1", id)
	if err != nil || v.Code != Admitted || v.Limit != 1<<40 || v.Reset != 1700000000 {
		t.Fatalf("forward = %+v, %v", v, err)
	}
	// The same request id again: answered from memory, not admitted twice.
	again, err := local.Forward(ctx, ownerAddr, "key-1", id)
	if err != nil || again != v {
		t.Fatalf("retry = %+v, %v; want %+v", again, err, v)
	}
	next, err := local.Forward(ctx, ownerAddr, "key-1", newID())
	if err != nil || next.Remaining != v.Remaining-1 {
		t.Fatalf("next = %+v, %v; want remaining %d (the retry admitted nothing)", next, err, v.Remaining-1)
	}
	if v, _ := local.Forward(ctx, ownerAddr, "revoked", newID()); v.Code != KeyRevoked {
		t.Fatalf("revoked key: %+v", v)
	}
}

// TestForwardRetryAfterNotOwner: "not the owner" and "unavailable" admit
// nothing and are not remembered: the same request id asked again (the
// forwarder's retry once the shard is taken) is admitted, once.
func TestForwardRetryAfterNotOwner(t *testing.T) {
	ctx := context.Background()
	id := newID()
	for _, want := range []VerdictCode{NotOwner, Unavailable, Admitted, Admitted} {
		v, err := local.Forward(ctx, ownerAddr, "notyet-1", id)
		if err != nil || v.Code != want {
			t.Fatalf("forward = %+v, %v; want code %d", v, err, want)
		}
	}
}

func TestForwardRetryWhileInFlight(t *testing.T) {
	id := newID()
	var wg sync.WaitGroup
	got := make([]Verdict, 4)
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			v, err := local.Forward(context.Background(), ownerAddr, "slow", id)
			if err != nil || v.Code != Admitted {
				t.Errorf("forward = %+v, %v", v, err)
			}
			got[i] = v
		}()
	}
	wg.Wait()
	next, err := local.Forward(context.Background(), ownerAddr, "key-1", newID())
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range got {
		if v != got[0] || next.Remaining != v.Remaining-1 {
			t.Fatalf("answers %+v then %+v: one request id admitted more than once", got, next)
		}
	}
}

func TestForwardToDeadNodeTimesOut(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := local.Forward(ctx, "127.0.0.1:1", "key-1", newID())
	if !errors.Is(err, ErrForward) {
		t.Fatalf("err = %v, want ErrForward", err)
	}
	if took := time.Since(start); took > time.Second {
		t.Fatalf("a forward to a dead node took %v", took)
	}
}

func TestStartRefusesABusyPort(t *testing.T) {
	if _, err := Start(ownerAddr, &countingAdmitter{}, time.Second, quietLogger()); err == nil {
		t.Fatal("a second transport on a busy port started")
	}
}

func TestWire(t *testing.T) {
	from, id, key, err := decodeAdmit(encodeAdmit("127.0.0.1:9", 42, "k/ü"))
	if err != nil || from != "127.0.0.1:9" || id != 42 || key != "k/ü" {
		t.Fatalf("admit round trip: %q %d %q %v", from, id, key, err)
	}
	v := Verdict{Code: Limited, Limit: 5, Remaining: 0, Reset: 99, RetryAfter: 12}
	if got, err := decodeVerdict(encodeVerdict(v)); err != nil || got != v {
		t.Fatalf("verdict round trip: %+v %v", got, err)
	}
	for _, b := range [][]byte{nil, {'A'}, {'A', 9}, {'V'}, {'V', 200}, append(encodeVerdict(v), 1)} {
		if _, err := decodeVerdict(b); err == nil {
			t.Errorf("decodeVerdict(%v) accepted", b)
		}
	}
	for _, b := range [][]byte{nil, {'A'}, {'A', 9}, {'V', 1}} {
		if _, _, _, err := decodeAdmit(b); err == nil {
			t.Errorf("decodeAdmit(%v) accepted", b)
		}
	}
}

func FuzzWire(f *testing.F) {
	f.Add(encodeAdmit("a:1", 3, "k"))
	f.Add(encodeVerdict(Verdict{Code: Admitted, Limit: 1}))
	f.Fuzz(func(t *testing.T, b []byte) {
		if from, id, key, err := decodeAdmit(b); err == nil {
			f2, id2, k2, err := decodeAdmit(encodeAdmit(from, id, key))
			if err != nil || f2 != from || id2 != id || k2 != key {
				t.Fatal("admit does not round-trip")
			}
		}
		if v, err := decodeVerdict(b); err == nil {
			if v2, err := decodeVerdict(encodeVerdict(v)); err != nil || v2 != v {
				t.Fatal("verdict does not round-trip")
			}
		}
	})
}

// TestForwardLatency reports a forwarded admission's round trip between
// two processes on loopback (issue 22: added p50 ≤ 0.5 ms).
func TestForwardLatency(t *testing.T) {
	ctx := context.Background()
	var ds []time.Duration
	for range 500 {
		start := time.Now()
		if _, err := local.Forward(ctx, ownerAddr, "key-1", newID()); err != nil {
			t.Fatal(err)
		}
		ds = append(ds, time.Since(start))
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	t.Logf("forward round trip between processes on loopback: p50 %v p99 %v (500 sequential)", ds[len(ds)/2], ds[len(ds)*99/100])
}

// BenchmarkForward: forwarded admissions per second, 8 in flight.
func BenchmarkForward(b *testing.B) {
	ctx := context.Background()
	b.SetParallelism(4)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := local.Forward(ctx, ownerAddr, "key-1", newID()); err != nil {
				b.Fatal(err)
			}
		}
	})
}
