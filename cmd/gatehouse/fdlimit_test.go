package main

import (
	"bufio"
	"context"
	"errors"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

// fdLimit is the RLIMIT_NOFILE (soft and hard) the tests' children run
// under: the caps derived from it are (256-64)/2 = 96 connections, 48 per
// address.
const fdLimit = "256"

// startLimited starts gatehouse on configPath under RLIMIT_NOFILE fdLimit
// (prlimit, util-linux) and waits until both listeners are up.
func startLimited(tb testing.TB, configPath string) *child {
	tb.Helper()
	prlimit := lookTool(tb, "prlimit", "install util-linux")
	bin, err := buildBinary()
	if err != nil {
		tb.Fatal(err)
	}
	env := append(os.Environ(), "GATEHOUSE_ADMIN_EMAIL="+adminEmail, "GATEHOUSE_ADMIN_PASSWORD="+adminPassword)
	return startProgram(tb, "", env, []string{prlimit, "--nofile=" + fdLimit + ":" + fdLimit, bin, "serve", "--config", configPath})
}

// idleConns opens n TCP connections from the loopback address from to
// base (http://host:port), sends nothing, and sorts them after wait: held
// (no answer: the server keeps them) or refused with their status line's
// code.
func idleConns(t *testing.T, from, base string, n int) (held []net.Conn, refused map[string]int) {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 5 * time.Second}
	conns := make([]net.Conn, 0, n)
	for range n {
		c, err := d.Dial("tcp", strings.TrimPrefix(base, "http://"))
		if err != nil {
			t.Fatalf("dial %s from %s: %v", base, from, err)
		}
		t.Cleanup(func() { c.Close() })
		conns = append(conns, c)
	}
	status := make([]string, n)
	var wg sync.WaitGroup
	for i, c := range conns {
		wg.Go(func() {
			_ = c.SetReadDeadline(time.Now().Add(time.Second))
			line, err := bufio.NewReader(c).ReadString('\n')
			var ne net.Error
			switch {
			case errors.As(err, &ne) && ne.Timeout() && line == "":
			case len(line) >= 12:
				status[i] = line[9:12]
			default:
				status[i] = "closed"
			}
		})
	}
	wg.Wait()
	refused = map[string]int{}
	for i, c := range conns {
		if status[i] == "" {
			held = append(held, c)
		} else {
			refused[status[i]]++
		}
	}
	return held, refused
}

// getFrom answers base+path's status, asked from the loopback address
// from on a new connection.
func getFrom(from, url string) (int, error) {
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
	cl := http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DisableKeepAlives: true, DialContext: d.DialContext}}
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	resp, err := cl.Do(req)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, nil
}

// servedAgain waits until both listeners answer /health from a fresh
// client address.
func servedAgain(t *testing.T, c *child) {
	t.Helper()
	for _, base := range []string{c.api, c.gateway} {
		var code int
		var err error
		if !eventually(10*time.Second, func() bool { code, err = getFrom("127.0.0.9", base+"/health"); return code == http.StatusOK }) {
			t.Fatalf("GET %s/health = %d, %v after the connections closed, want 200\n%s", base, code, err, c.logs.String())
		}
	}
}

func closeAll(conns []net.Conn) {
	for _, c := range conns {
		c.Close()
	}
}

// TestFDLimitCaps: under a 256-descriptor limit, one client address gets
// 48 connections (the rest 429), the server 96 across both listeners (the
// rest 503: 48 + 40 + 8), and the process and both listeners outlive it (issue 31:
// idle connections from one client exhausted the descriptors, accept4
// failed with EMFILE and the process exited).
func TestFDLimitCaps(t *testing.T) {
	// Its own data dir and ports: independent of the others, mostly waiting on its process.
	t.Parallel()
	c := startLimited(t, writeConfig(t, t.TempDir(), nil))
	if !strings.Contains(c.logs.String(), `"fd_limit":256`) || !strings.Contains(c.logs.String(), `"max_conns":96,"max_conns_per_ip":48`) {
		t.Fatalf("start-up log lacks the fd limit and the derived caps:\n%s", c.logs.String())
	}
	heldA, refusedA := idleConns(t, "127.0.0.1", c.api, 70)
	heldB, refusedB := idleConns(t, "127.0.0.2", c.gateway, 40)
	heldC, refusedC := idleConns(t, "127.0.0.3", c.api, 20)
	for _, tt := range []struct {
		client         string
		held, wantHeld int
		refused, want  map[string]int
	}{
		{"127.0.0.1 (api)", len(heldA), 48, refusedA, map[string]int{"429": 22}},
		{"127.0.0.2 (gateway)", len(heldB), 40, refusedB, map[string]int{}},
		{"127.0.0.3 (api)", len(heldC), 8, refusedC, map[string]int{"503": 12}},
	} {
		if tt.held != tt.wantHeld || !maps.Equal(tt.refused, tt.want) {
			t.Errorf("client %s: %d held, refused %v; want %d held, refused %v", tt.client, tt.held, tt.refused, tt.wantHeld, tt.want)
		}
	}
	if code, err := getFrom("127.0.0.9", c.gateway+"/health"); code != http.StatusServiceUnavailable {
		t.Errorf("GET gateway /health at the cap = %d, %v, want 503", code, err)
	}
	closeAll(heldA)
	closeAll(heldB)
	closeAll(heldC)
	servedAgain(t, c)
	c.stop(t)
}

// TestFDLimitAcceptRetried: caps set above the descriptor limit, so
// accept4 fails with EMFILE; accepting pauses and resumes once the
// connections close, and the process never exits.
func TestFDLimitAcceptRetried(t *testing.T) {
	// Its own data dir and ports: independent of the others, mostly waiting on its process.
	t.Parallel()
	c := startLimited(t, writeConfig(t, t.TempDir(), map[string]any{
		"server": map[string]any{"host": "127.0.0.1", "port": 0, "max_conns": 1000, "max_conns_per_ip": 1000},
	}))
	held, refused := idleConns(t, "127.0.0.1", c.api, 300)
	if len(refused) != 0 {
		t.Errorf("refused %v, want none (the caps are above the limit)", refused)
	}
	if !eventually(5*time.Second, func() bool { return strings.Contains(c.logs.String(), "out of file descriptors") }) {
		t.Fatalf("no EMFILE pause logged:\n%s", c.logs.String())
	}
	select {
	case <-c.done:
		t.Fatalf("gatehouse exited when out of file descriptors:\n%s", c.logs.String())
	default:
	}
	closeAll(held)
	servedAgain(t, c)
	c.stop(t)
}

func TestDeriveConnCaps(t *testing.T) {
	tests := []struct {
		name             string
		maxConns, perIP  int
		fdLimit          uint64
		wantMax, wantPer int
	}{
		{"derived at 1024", 0, 0, 1024, 480, 240},
		{"derived at 256", 0, 0, 256, 96, 48},
		{"tiny limit", 0, 0, 10, 1, 1},
		{"huge limit", 0, 0, 1 << 62, (1<<31 - 1 - fdReserve) / 2, (1<<31 - 1 - fdReserve) / 4},
		{"unknown limit: off", 0, 0, 0, 0, 0},
		{"set", 100, 10, 1024, 100, 10},
		{"per address set, total derived", 0, 300, 256, 96, 96},
		{"total set above the limit", 5000, 0, 1024, 5000, 2500},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := deriveConnCaps(tt.maxConns, tt.perIP, tt.fdLimit)
			if got.max != tt.wantMax || got.perIP != tt.wantPer {
				t.Errorf("deriveConnCaps(%d, %d, %d) = %d, %d; want %d, %d", tt.maxConns, tt.perIP, tt.fdLimit, got.max, got.perIP, tt.wantMax, tt.wantPer)
			}
		})
	}
}
