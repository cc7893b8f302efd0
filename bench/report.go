package bench

import (
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"
)

// Targets of issue 25, checked by the report.
const (
	maxCPUVsPeer      = 1.0  // CPU per request × the better peer's, every key count
	minRPSVsPeer      = 1.0  // req/s × each peer's, every key count
	minHotVsBare      = 0.90 // one hot key, req/s × the bare hop's
	maxP99VsBare      = 1.5  // every proxy case: p99 × the bare hop's
	minValidateVsBase = 0.90 // validate × a bare handler with a fixed body
)

// Meta describes a run for its report.
type Meta struct {
	Date    time.Time
	Command string
	// Extra is appended to the section verbatim (the allocation
	// benchmark's output, for one).
	Extra string
}

// Stats are a target's figures over all its rounds.
type Stats struct {
	RPS, MinRPS, MaxRPS float64
	Latency             Histogram
	// CPUPerReq is the server's CPU time (user + system, all its
	// processes) per request served, in its cheapest round: the rounds
	// are interleaved, so the cheapest is the one least disturbed by
	// whatever else the machine did.
	CPUPerReq     time.Duration
	LoadCPUPerReq time.Duration
	Errors        int64
	Wrk           float64 // the median of wrk's req/s, 0 without wrk
}

// Stats sums t's rounds.
func (t *Target) Stats() Stats {
	st := Stats{Wrk: median(t.Wrk)}
	var reqs int64
	var secs float64
	for i, r := range t.Rounds {
		rps := r.Throughput()
		if i == 0 || rps < st.MinRPS {
			st.MinRPS = rps
		}
		st.MaxRPS = max(st.MaxRPS, rps)
		reqs += r.Requests
		secs += r.Elapsed.Seconds()
		st.Latency.Merge(&r.Latency)
		st.Errors += r.Errors
		if i < len(t.RoundCPU) && r.Requests > 0 {
			if c := t.RoundCPU[i] / time.Duration(r.Requests); st.CPUPerReq == 0 || c < st.CPUPerReq {
				st.CPUPerReq = c
			}
		}
	}
	if secs > 0 {
		st.RPS = float64(reqs) / secs
	}
	if reqs > 0 {
		st.LoadCPUPerReq = t.LoadCPU / time.Duration(reqs)
	}
	return st
}

// isProxy reports whether t proxies the stub with key auth: gatehouse or
// a peer.
func (t *Target) isProxy() bool {
	return t.Kind == KindGateway || t.Kind == KindNginxLua || t.Kind == KindHAProxy
}

// Report renders the run as a dated section of bench/RESULTS.md.
func (s *Suite) Report(m Meta) string {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	p("## %s — proxy: gatehouse vs a bare hop, nginx, nginx+Lua and HAProxy (issue 25)", m.Date.UTC().Format("2006-01-02 15:04 MST"))
	p("")
	p("Machine: %s; %s; %s; %s.", machine(), runtime.Version(), s.Nginx, s.HAProxy)
	p("")
	p("Command: `%s` (`make bench`). Each server is its own process on loopback; the load generator (bench/loadgen.go, Go, "+
		"closed loop) shares the two cores with them. %d keep-alive connections, %d-byte JSON answers, "+
		"%d rounds × %v measured (+%v warm-up) per target, the targets interleaved in each round. gatehouse runs with "+
		"auth, limiter, usage counting and the WAL (fsync) on; its keys' limits are raised so nothing is refused. "+
		"The peers (bench/peers.go) do the same work per request with the same keys: nginx + ngx_lua as Kong OSS "+
		"works (SHA-256 of the key through LuaJIT's FFI, lua_shared_dict lookup, a fixed-hour counter) and HAProxy "+
		"(sha2(256), a map file, a stick table with http_req_rate(1h)), both setting the same rate-limit headers. "+
		"CPU/req is the server's processes' user + system time (/proc) per request served, in the cheapest round.",
		m.Command, s.cfg.Conns, s.cfg.BodyBytes, s.cfg.Rounds, s.cfg.Duration, s.cfg.Warmup)
	p("")
	stats := make([]Stats, len(s.Targets))
	var bare, nginx, fixed, bareWrk, fixedWrk float64
	var bareP99 time.Duration
	for i, t := range s.Targets {
		stats[i] = t.Stats()
		switch t.Kind {
		case KindBare:
			bare, bareWrk, bareP99 = stats[i].RPS, stats[i].Wrk, stats[i].Latency.Quantile(0.99)
		case KindNginx:
			nginx = stats[i].RPS
		case KindFixed:
			fixed, fixedWrk = stats[i].RPS, stats[i].Wrk
		}
	}
	p("| target | req/s | min–max | p50 | p99 | p999 | CPU/req | load gen CPU/req | × bare hop | × nginx | wrk req/s | wrk × its baseline | errors |")
	p("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for i, t := range s.Targets {
		st := &stats[i]
		ratio := func(base float64) string {
			if t.Kind == KindDirect || t.Kind == KindValidate || t.Kind == KindFixed || base == 0 {
				return "—"
			}
			return fmt.Sprintf("%.2f", st.RPS/base)
		}
		wrk, wrkRatio := "—", "—"
		if w := st.Wrk; w > 0 {
			wrk = thousands(w)
			base := bareWrk
			if t.Kind == KindValidate {
				base = fixedWrk
			}
			if base > 0 && t.Kind != KindBare && t.Kind != KindFixed && t.Kind != KindDirect {
				wrkRatio = fmt.Sprintf("%.2f", w/base)
			}
		}
		p("| %s | %s | %s–%s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %d |", t.Name, thousands(st.RPS), thousands(st.MinRPS), thousands(st.MaxRPS),
			dur(st.Latency.Quantile(0.5)), dur(st.Latency.Quantile(0.99)), dur(st.Latency.Quantile(0.999)),
			cpuDur(st.CPUPerReq), cpuDur(st.LoadCPUPerReq), ratio(bare), ratio(nginx), wrk, wrkRatio, st.Errors)
	}
	p("")
	s.peerTable(p, stats)
	p("Latency without queueing (%d connection, closed loop, %v):", s.cfg.LatencyConns, s.cfg.Duration)
	p("")
	p("| target | req/s | p50 | p99 | p999 | p99 added to direct |")
	p("|---|---:|---:|---:|---:|---:|")
	var direct time.Duration
	for _, t := range s.Targets {
		if t.Latency == nil {
			continue
		}
		h := &t.Latency.Latency
		added := "—"
		switch t.Kind {
		case KindDirect:
			direct = h.Quantile(0.99)
		case KindValidate, KindFixed:
		default:
			added = dur(h.Quantile(0.99) - direct)
		}
		p("| %s | %s | %s | %s | %s | %s |", t.Name, thousands(t.Latency.Throughput()), dur(h.Quantile(0.5)), dur(h.Quantile(0.99)), dur(h.Quantile(0.999)), added)
	}
	p("")
	p("Targets (issue 25):")
	p("")
	for _, line := range s.verdicts(stats, bare, fixed, bareP99) {
		p("- %s", line)
	}
	for _, t := range s.Targets {
		if t.Failed != nil {
			p("- ✘ %s: a run failed outright: %v", t.Name, t.Failed)
		}
	}
	if m.Extra != "" {
		p("")
		p("%s", strings.TrimRight(m.Extra, "\n"))
	}
	return b.String()
}

// peerOf returns the index of the target of kind that serves as many
// keys as t, or -1.
func (s *Suite) peerOf(t *Target, kind string) int {
	for i, u := range s.Targets {
		if u.Kind == kind && len(u.Requests) == len(t.Requests) {
			return i
		}
	}
	return -1
}

// peerTable writes the summary against the peers: per key count, each
// gatehouse's CPU per request and req/s as ratios to each peer's.
func (s *Suite) peerTable(p func(string, ...any), stats []Stats) {
	var rows []string
	for i, t := range s.Targets {
		if t.Kind != KindGateway {
			continue
		}
		lua, ha := s.peerOf(t, KindNginxLua), s.peerOf(t, KindHAProxy)
		if lua < 0 || ha < 0 {
			continue
		}
		st, ls, hs := stats[i], stats[lua], stats[ha]
		rows = append(rows, fmt.Sprintf("| %s | %s | %s | %s | %s | %s | %s | %s |", t.Name,
			cpuDur(st.CPUPerReq), cpuDur(ls.CPUPerReq), cpuDur(hs.CPUPerReq),
			ratioOf(float64(st.CPUPerReq), float64(ls.CPUPerReq)), ratioOf(float64(st.CPUPerReq), float64(hs.CPUPerReq)),
			ratioOf(st.RPS, ls.RPS), ratioOf(st.RPS, hs.RPS)))
	}
	if len(rows) == 0 {
		return
	}
	p("Against the peers, the same keys (CPU/req: cheapest round; × a peer: gatehouse's figure over the peer's):")
	p("")
	p("| gatehouse case | CPU/req | nginx+Lua CPU/req | HAProxy CPU/req | CPU × nginx+Lua | CPU × HAProxy | req/s × nginx+Lua | req/s × HAProxy |")
	p("|---|---:|---:|---:|---:|---:|---:|---:|")
	for _, r := range rows {
		p("%s", r)
	}
	p("")
}

func ratioOf(a, b float64) string {
	if b == 0 {
		return "—"
	}
	return fmt.Sprintf("%.2f", a/b)
}

// verdicts checks issue 25's targets against the run, for every gatehouse
// built from the working tree: per key count, CPU per request ≤ 1.0× the
// better peer's and req/s ≥ 1.0× each peer's; one hot key ≥ 0.90× the
// bare hop; every proxy case's p99 ≤ 1.5× the hop's; validate ≥ 0.90× a
// bare handler answering a fixed body.
func (s *Suite) verdicts(stats []Stats, bare, fixed float64, bareP99 time.Duration) []string {
	mark := func(ok bool) string {
		if ok {
			return "✔"
		}
		return "✘"
	}
	var out []string
	for i, t := range s.Targets {
		st := stats[i]
		switch {
		case t.Baseline:
		case t.Kind == KindGateway:
			if lua, ha := s.peerOf(t, KindNginxLua), s.peerOf(t, KindHAProxy); lua >= 0 && ha >= 0 {
				ls, hs := stats[lua], stats[ha]
				better := min(ls.CPUPerReq, hs.CPUPerReq)
				c := float64(st.CPUPerReq) / float64(max(better, 1))
				vl, vh := st.RPS/max(ls.RPS, 1), st.RPS/max(hs.RPS, 1)
				out = append(out, fmt.Sprintf("%s %s: CPU/req %.2f× the better peer's (target ≤ %.1f); %s req/s %.2f× nginx+Lua, %.2f× HAProxy (target ≥ %.1f)",
					mark(c <= maxCPUVsPeer), t.Name, c, maxCPUVsPeer, mark(vl >= minRPSVsPeer && vh >= minRPSVsPeer), vl, vh, minRPSVsPeer))
			}
			p99 := float64(st.Latency.Quantile(0.99)) / float64(max(bareP99, 1))
			line := fmt.Sprintf("%s %s: p99 %.2f× the bare hop's (target ≤ %.1f)", mark(p99 <= maxP99VsBare), t.Name, p99, maxP99VsBare)
			if len(t.Requests) == 1 {
				vb := st.RPS / max(bare, 1)
				line += fmt.Sprintf("; %s %.2f× the bare hop's req/s (target ≥ %.2f)", mark(vb >= minHotVsBare), vb, minHotVsBare)
			}
			out = append(out, line)
		case t.Kind == KindValidate && fixed > 0:
			v := st.RPS / fixed
			out = append(out, fmt.Sprintf("%s validate: %.2f× the bare fixed-body handler (target ≥ %.2f)", mark(v >= minValidateVsBase), v, minValidateVsBase))
		}
	}
	return out
}

// median of xs (0 when empty).
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// machine describes the host: kernel, CPU, cores, memory, load.
func machine() string {
	var u syscall.Utsname
	_ = syscall.Uname(&u)
	cpu := "unknown CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				cpu = strings.TrimSpace(v)
				break
			}
		}
	}
	mem := ""
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		var kb int64
		if _, err := fmt.Sscanf(string(b), "MemTotal: %d kB", &kb); err == nil {
			mem = fmt.Sprintf(", %d GiB", (kb+(1<<19))>>20)
		}
	}
	load := ""
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		if f := strings.Fields(string(b)); len(f) >= 3 {
			load = ", load average " + strings.Join(f[:3], " ") + " at the end"
		}
	}
	return fmt.Sprintf("%s %s, %s, %d cores%s%s", utsString(u.Sysname[:]), utsString(u.Release[:]), cpu, runtime.NumCPU(), mem, load)
}

func utsString[T int8 | uint8](b []T) string {
	var s []byte
	for _, c := range b {
		if c == 0 {
			break
		}
		s = append(s, byte(c))
	}
	return string(s)
}

// thousands formats a rate as "41,234".
func thousands(v float64) string {
	s := fmt.Sprintf("%.0f", v)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// dur formats a latency as µs below 10 ms, else ms.
func dur(d time.Duration) string {
	switch {
	case d < 0:
		return "−" + dur(-d)
	case d < 10*time.Millisecond:
		return fmt.Sprintf("%d µs", d.Microseconds())
	default:
		return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond))
	}
}

// cpuDur formats a CPU time per request as "41.3 µs".
func cpuDur(d time.Duration) string {
	return fmt.Sprintf("%.1f µs", float64(d)/float64(time.Microsecond))
}

// AppendResults appends section to the results file at path, after a
// blank line, creating the file with its heading if needed.
func AppendResults(path, section string) error {
	if _, err := os.Stat(path); os.IsNotExist(err) {
		head := "# Benchmark results\n\nEach section is one run on one machine, with the command and the date.\n"
		if err := os.WriteFile(path, []byte(head), 0o644); err != nil {
			return err
		}
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.WriteString("\n" + section); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
