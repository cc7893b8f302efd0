// Command benchsuite runs gatehouse's benchmark cases, prints their tables
// and appends them to -results. See package bench. The cases (-cases):
// proxy, the stub upstream direct, a bare fasthttp hop, nginx and
// gatehouse side by side in one run; turn, the agent gateway's time per
// chat turn (echo provider); isolation, a quiet user's latencies with and
// without a noisy neighbour searching its memory; halves, the key
// service's /health while the agent gateway of the same process takes a
// burst of 1 MB chat messages; chat, the chat path's CPU per request,
// streamed or not, at 1 and -conns connections, beside a bare forwarder.
//
//	go run ./bench/cmd/benchsuite -results bench/RESULTS.md   # what `make bench` runs: every case
//	go run ./bench/cmd/benchsuite -cases isolation,turn       # the agent gateway's cases only
//	go run ./bench/cmd/benchsuite -cases isolation -pin       # the suite on CPU 0, the gatehouse on CPU 1
//
// The subcommands `stub`, `barehop`, `fixed` and `chatfwd` are the suite's own child
// processes.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"gatehouse/bench"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "load" {
		if err := load(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "benchsuite load:", err)
			os.Exit(1)
		}
		return
	}
	if len(os.Args) > 1 && (os.Args[1] == "stub" || os.Args[1] == "barehop" || os.Args[1] == "fixed" || os.Args[1] == "chatfwd") {
		fs := flag.NewFlagSet(os.Args[1], flag.ExitOnError)
		body := fs.Int("body", 1024, "answer size in bytes (stub)")
		upstream := fs.String("upstream", "", "upstream host:port (barehop)")
		_ = fs.Parse(os.Args[2:])
		if err := bench.ServeSubcommand(os.Stdout, os.Args[1], *body, *upstream); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "benchsuite:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context) error {
	cfg, agents := bench.DefaultConfig(), bench.DefaultAgentConfig()
	cases := map[string]bool{bench.CaseProxy: true, bench.CaseIsolation: true, bench.CaseTurn: true, bench.CaseHalves: true, bench.CaseChat: true}
	flag.Func("cases", "cases to run, comma-separated: proxy, isolation, turn, halves, chat (default all)", func(v string) error {
		known := []string{bench.CaseProxy, bench.CaseIsolation, bench.CaseTurn, bench.CaseHalves, bench.CaseChat}
		clear(cases)
		for _, f := range strings.Split(v, ",") {
			f = strings.TrimSpace(f)
			if !slices.Contains(known, f) {
				return fmt.Errorf("unknown case %q (known: %s)", f, strings.Join(known, ", "))
			}
			cases[f] = true
		}
		return nil
	})
	flag.IntVar(&agents.Iso.Entries, "entries", agents.Iso.Entries, "isolation: memory entries the noisy user saves")
	flag.IntVar(&agents.Iso.Searchers, "searchers", agents.Iso.Searchers, "isolation: the noisy user's concurrent memory searches")
	flag.DurationVar(&agents.Iso.Duration, "iso-duration", agents.Iso.Duration, "isolation: measured time per phase (alone, beside the neighbour)")
	flag.IntVar(&agents.Turns, "turns", agents.Turns, "turn: sequential chat turns measured")
	flag.IntVar(&agents.Half.Messages, "halves-messages", agents.Half.Messages, "halves: 1 MB chat messages per burst")
	flag.IntVar(&agents.Half.Senders, "halves-senders", agents.Half.Senders, "halves: concurrent senders of the burst")
	flag.IntVar(&cfg.Conns, "conns", cfg.Conns, "connections of the throughput runs")
	flag.IntVar(&cfg.LatencyConns, "latency-conns", cfg.LatencyConns, "connections of the latency runs")
	flag.DurationVar(&cfg.Duration, "duration", cfg.Duration, "measured time per target and round")
	flag.DurationVar(&cfg.Warmup, "warmup", cfg.Warmup, "warm-up before each measurement")
	flag.IntVar(&cfg.Rounds, "rounds", cfg.Rounds, "rounds, targets interleaved")
	flag.Func("keys", "key counts of the spread-keys cases, comma-separated (default 5000,50000)", func(v string) error {
		cfg.Keys = nil
		for _, f := range strings.Split(v, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil {
				return err
			}
			cfg.Keys = append(cfg.Keys, n)
		}
		return nil
	})
	flag.IntVar(&cfg.BodyBytes, "body", cfg.BodyBytes, "stub answer size in bytes")
	flag.StringVar(&cfg.Vs, "vs", "", "also measure gatehouse built from this git revision, beside the working tree's")
	results := flag.String("results", "", "append the report to this Markdown file")
	allocs := flag.Bool("allocs", true, "also run the auth+limit allocation benchmarks (go test)")
	keep := flag.Bool("keep", false, "keep the work dir (configs, logs, data)")
	flag.BoolVar(&agents.Iso.Pin, "pin", false, "agent cases: the suite (load generator) on CPU 0, the gatehouses on CPU 1 (taskset; needs 2 CPUs)")
	flag.Parse()
	if agents.Iso.Pin {
		if cases[bench.CaseProxy] || cases[bench.CaseChat] {
			return fmt.Errorf("-pin is for the agent cases (isolation, turn, halves): the proxy and chat cases' servers would share CPU 0 with the load")
		}
		if err := bench.PinLoad(); err != nil {
			return err
		}
	}

	exe, err := os.Executable()
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "gatehouse-bench-")
	if err != nil {
		return err
	}
	if *keep {
		fmt.Fprintln(os.Stderr, "work dir:", dir)
	} else {
		defer os.RemoveAll(dir)
	}
	cfg.Self, cfg.Dir, cfg.Log = []string{exe}, dir, os.Stderr
	agents.Dir, agents.Vs, agents.Log = dir, cfg.Vs, os.Stderr
	agents.Isolation, agents.Turn, agents.Halves = cases[bench.CaseIsolation], cases[bench.CaseTurn], cases[bench.CaseHalves]
	command := strings.TrimSpace("go run ./bench/cmd/benchsuite " + strings.Join(os.Args[1:], " "))

	var reports []string
	if cases[bench.CaseProxy] {
		report, err := runProxy(ctx, cfg, command, *allocs)
		if err != nil {
			return err
		}
		reports = append(reports, report)
	}
	if agents.Isolation || agents.Turn || agents.Halves {
		report, err := runAgents(ctx, agents, command)
		if err != nil {
			return err
		}
		reports = append(reports, report)
	}
	if cases[bench.CaseChat] {
		s, err := bench.StartChat(ctx, bench.ChatConfig{Conns: []int{1, cfg.Conns}, Warmup: cfg.Warmup, Duration: cfg.Duration,
			Rounds: cfg.Rounds, Dir: dir, Vs: cfg.Vs, Self: []string{exe}, Log: os.Stderr})
		if err != nil {
			return err
		}
		report, err := runSuite(ctx, s, func() bench.Meta { return bench.Meta{Date: time.Now(), Command: command} })
		if err != nil {
			return err
		}
		reports = append(reports, report)
	}
	for _, report := range reports {
		fmt.Print("\n" + report)
		if *results != "" {
			if err := bench.AppendResults(*results, report); err != nil {
				return err
			}
			fmt.Fprintln(os.Stderr, "appended to", *results)
		}
	}
	return nil
}

// runProxy runs the proxy case and returns its report.
func runProxy(ctx context.Context, cfg bench.Config, command string, allocs bool) (string, error) {
	s, err := bench.Start(ctx, cfg)
	if err != nil {
		return "", err
	}
	return runSuite(ctx, s, func() bench.Meta {
		meta := bench.Meta{Date: time.Now(), Command: command}
		if allocs {
			meta.Extra = allocBenchmarks(ctx)
		}
		return meta
	})
}

// runAgents runs the agent gateway's cases (isolation, turn) and returns
// their report.
func runAgents(ctx context.Context, cfg bench.AgentConfig, command string) (string, error) {
	s, err := bench.StartAgents(ctx, cfg)
	if err != nil {
		return "", err
	}
	return runSuite(ctx, s, func() bench.Meta { return bench.Meta{Date: time.Now(), Command: command} })
}

// suite is a started set of bench cases.
type suite interface {
	Run(ctx context.Context) error
	Stop()
	Report(meta bench.Meta) string
}

// runSuite runs s, stops it, and reports it with the meta made after the
// run (its targets stopped first, so that extra measurements run alone).
func runSuite(ctx context.Context, s suite, meta func() bench.Meta) (string, error) {
	err := s.Run(ctx)
	s.Stop()
	if err != nil {
		return "", err
	}
	return s.Report(meta()), nil
}

// load runs the load generator alone against a gatehouse proxy (for
// BenchmarkProxyProcess): one line of results on stdout.
func load(args []string) error {
	fs := flag.NewFlagSet("load", flag.ExitOnError)
	addr := fs.String("addr", "", "host:port to load")
	keys := fs.String("keys", "", "file of API keys, one a line")
	conns := fs.Int("conns", 64, "connections")
	d := fs.Duration("duration", 5*time.Second, "measured time")
	validate := fs.Bool("validate", false, "send POST /api/keys/validate instead of proxied requests")
	_ = fs.Parse(args)
	b, err := os.ReadFile(*keys)
	if err != nil {
		return err
	}
	request := bench.ProxyRequest
	if *validate {
		request = bench.ValidateRequest
	}
	var reqs [][]byte
	for _, k := range strings.Fields(string(b)) {
		reqs = append(reqs, request(k))
	}
	res, err := bench.Run(context.Background(), bench.Load{Addr: *addr, Requests: reqs, Conns: *conns, Warmup: time.Second, Duration: *d, Status: 200})
	if err != nil {
		return err
	}
	fmt.Printf("%.0f req/s, p50 %v, p99 %v, errors %d\n", res.Throughput(), res.Latency.Quantile(0.5), res.Latency.Quantile(0.99), res.Errors)
	return nil
}

// allocBenchmarks runs the benchmarks that show what the auth+limit path
// allocates, and returns their output for the report.
func allocBenchmarks(ctx context.Context) string {
	fmt.Fprintln(os.Stderr, "running the auth+limit allocation benchmarks")
	cmd := exec.CommandContext(ctx, "go", "test", "-run", "^$", "-bench", "ProxyAuthPath|Authorize",
		"-benchmem", "-benchtime", "2s", "./httpapi", "./bench")
	out, err := cmd.CombinedOutput()
	var lines []string
	for _, l := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(l, "Benchmark") {
			lines = append(lines, l)
		}
	}
	text := "Auth+limit path, allocations (`go test -run '^$' -bench 'ProxyAuthPath|Authorize' -benchmem -benchtime 2s ./httpapi ./bench`):\n\n```\n" +
		strings.Join(lines, "\n") + "\n```\n"
	if err != nil {
		text += fmt.Sprintf("\n(the benchmarks failed: %v)\n", err)
	}
	return text
}
