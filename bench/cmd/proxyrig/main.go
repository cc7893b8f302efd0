// Command proxyrig starts what one gatehouse proxy case of the bench runs
// against, and leaves it running for a profiler: the stub upstream,
// gatehouse built from the working tree with its keys, and a wrk script
// sending the suite's request with the keys rotated. It prints the
// addresses, gatehouse's PID and the wrk command, and stops everything on
// SIGINT or SIGTERM.
//
//	go run ./bench/cmd/proxyrig -keys 5000
//	perf record -F 2000 -g -p PID -- sleep 5   # beside the printed wrk command
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
	flag.Parse()
	if err := run(*keys, *body, *dir, *rounds); err != nil {
		log.Fatal(err)
	}
}

func run(nkeys, body int, dir string, rounds int) error {
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
	bin, err := bench.BuildGatehouse(dir)
	if err != nil {
		return err
	}
	p, addr, err := bench.StartGatehouse(bin, dir, ln.Addr().String())
	if err != nil {
		return err
	}
	defer p.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	secrets, err := bench.Provision(ctx, "http://"+addr, nkeys)
	if err != nil {
		return err
	}
	keys := filepath.Join(dir, "keys")
	if err := os.WriteFile(keys, []byte(strings.Join(secrets, "\n")+"\n"), 0o600); err != nil {
		return err
	}
	script := filepath.Join(dir, "proxy.lua")
	lua := fmt.Sprintf("wrk.method = \"GET\"\nwrk.path = \"/api/proxy/%s/v1/items?page=1\"\n", bench.ServiceName) +
		bench.WrkRotateKeys(keys)
	if err := os.WriteFile(script, []byte(lua), 0o600); err != nil {
		return err
	}
	for r := range rounds {
		for _, c := range []struct {
			name string
			keys []string
		}{{"1 hot key", secrets[:1]}, {fmt.Sprintf("%d keys", nkeys), secrets}} {
			reqs := make([][]byte, len(c.keys))
			for i, k := range c.keys {
				reqs[i] = bench.ProxyRequest(k)
			}
			var cpu0, cpu1 time.Duration
			res, err := bench.Run(ctx, bench.Load{Addr: addr, Requests: reqs, Conns: 64, Warmup: time.Second,
				Duration: 5 * time.Second, Status: 200, OnWindow: func(start bool) {
					if start {
						cpu0 = p.CPU()
					} else {
						cpu1 = p.CPU()
					}
				}})
			if err != nil {
				return err
			}
			fmt.Printf("round %d %-10s %8.0f req/s  CPU/req %5.1f µs  errors %d\n", r+1, c.name, res.Throughput(),
				float64((cpu1-cpu0).Microseconds())/float64(res.Requests), res.Errors)
		}
	}
	fmt.Printf("upstream %s\ngatehouse %s pid %d\nwrk -t2 -c64 -d10s -s %s http://%s\n", ln.Addr(), addr, p.PID(), script, addr)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	<-sig
	return nil
}
