// Command proxyrig starts what one gatehouse proxy case of the bench runs
// against, and leaves it running for a profiler: the stub upstream,
// gatehouse built from the working tree with its keys, and a wrk script
// sending the suite's request with the keys rotated. It prints the
// addresses, gatehouse's PID and the wrk command, and stops everything on
// SIGINT or SIGTERM.
//
// With -rounds it first runs the suite's load generator, one hot key then
// the spread keys, and prints each round's req/s and CPU per request; with
// -vs REV too, a gatehouse built from REV beside it, the two alternated
// round by round against the same stub (a quicker A/B than the suite).
//
//	go run ./bench/cmd/proxyrig -keys 5000
//	perf record -F 2000 -g -p PID -- sleep 5   # beside the printed wrk command
//	go run ./bench/cmd/proxyrig -keys 5000 -rounds 8 -vs main
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"gatehouse/bench"
)

func main() {
	keys := flag.Int("keys", 1, "keys rotated by the wrk script")
	body := flag.Int("body", 1024, "stub answer size in bytes")
	dir := flag.String("dir", "", "work dir (default: a new temporary one)")
	rounds := flag.Int("rounds", 0, "rounds of the suite's load generator to run first, one hot key then the spread keys alternated")
	vs := flag.String("vs", "", "also run gatehouse built from this git revision, alternated with the working tree's in the rounds")
	flag.Parse()
	if err := run(*keys, *body, *dir, *rounds, *vs); err != nil {
		log.Fatal(err)
	}
}

// server is one gatehouse under test.
type server struct {
	name    string
	p       *bench.Proc
	addr    string
	secrets []string
}

func run(nkeys, body int, dir string, rounds int, vs string) error {
	if dir == "" {
		d, err := os.MkdirTemp("", "proxyrig-")
		if err != nil {
			return err
		}
		dir = d
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	go func() { _ = bench.Serve(ln, bench.Upstream(bench.JSONBody(body))) }()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	start := func(name, sub, rev string) (*server, error) {
		d := filepath.Join(dir, sub)
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
		var bin string
		if rev == "" {
			bin, err = bench.BuildGatehouse(d)
		} else {
			bin, err = bench.BuildGatehouseAt(rev, d)
		}
		if err != nil {
			return nil, err
		}
		p, addr, err := bench.StartGatehouse(bin, d, ln.Addr().String())
		if err != nil {
			return nil, err
		}
		secrets, err := bench.Provision(ctx, "http://"+addr, nkeys)
		if err != nil {
			p.Stop()
			return nil, err
		}
		return &server{name: name, p: p, addr: addr, secrets: secrets}, nil
	}
	gh, err := start("gatehouse", "tree", "")
	if err != nil {
		return err
	}
	defer gh.p.Stop()
	servers := []*server{gh}
	if vs != "" {
		old, err := start("gatehouse@"+vs, "vs", vs)
		if err != nil {
			return err
		}
		defer old.p.Stop()
		servers = append(servers, old)
	}
	for r := range rounds {
		for _, n := range []int{1, nkeys} {
			for _, s := range servers {
				if err := measure(ctx, r, s, n); err != nil {
					return err
				}
			}
		}
	}
	keys := filepath.Join(dir, "keys")
	if err := os.WriteFile(keys, []byte(strings.Join(gh.secrets, "\n")+"\n"), 0o600); err != nil {
		return err
	}
	script := filepath.Join(dir, "proxy.lua")
	lua := fmt.Sprintf("wrk.method = \"GET\"\nwrk.path = \"/api/proxy/%s/v1/items?page=1\"\n", bench.ServiceName) +
		bench.WrkRotateKeys(keys)
	if err := os.WriteFile(script, []byte(lua), 0o600); err != nil {
		return err
	}
	fmt.Printf("upstream %s\ngatehouse %s pid %d\nwrk -t2 -c64 -d10s -s %s http://%s\n", ln.Addr(), gh.addr, gh.p.PID(), script, gh.addr)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	<-sig
	return nil
}

// measure runs one round of the suite's load generator on s with its
// first n keys and prints req/s and CPU per request.
func measure(ctx context.Context, round int, s *server, n int) error {
	reqs := make([][]byte, n)
	for i, k := range s.secrets[:n] {
		reqs[i] = bench.ProxyRequest(k)
	}
	var cpu0, cpu1 time.Duration
	res, err := bench.Run(ctx, bench.Load{Addr: s.addr, Requests: reqs, Conns: 64, Warmup: time.Second,
		Duration: 5 * time.Second, Status: 200, OnWindow: func(start bool) {
			if start {
				cpu0 = s.p.CPU()
			} else {
				cpu1 = s.p.CPU()
			}
		}})
	if err != nil {
		return err
	}
	fmt.Printf("round %d %-22s %5d keys %8.0f req/s  CPU/req %5.1f µs  errors %d\n", round+1, s.name, n, res.Throughput(),
		float64((cpu1-cpu0).Microseconds())/float64(res.Requests), res.Errors)
	return nil
}
