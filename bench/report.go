package bench

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"syscall"
	"time"
)

// Targets of issue 4, checked by the report.
const (
	minVsBare      = 0.85
	minVsNginx     = 1.1
	maxAddedP99    = time.Millisecond
	minValidateRPS = 80_000
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
	CPUPerReq           time.Duration
	LoadCPUPerReq       time.Duration
	Errors              int64
}

// Stats sums t's rounds.
func (t *Target) Stats() Stats {
	var st Stats
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
	}
	if secs > 0 {
		st.RPS = float64(reqs) / secs
	}
	if reqs > 0 {
		st.CPUPerReq = t.CPU / time.Duration(reqs)
		st.LoadCPUPerReq = t.LoadCPU / time.Duration(reqs)
	}
	return st
}

// Report renders the run as a dated section of bench/RESULTS.md.
func (s *Suite) Report(m Meta) string {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	p("## %s — proxy throughput: gatehouse vs a bare hop vs nginx (issue 4)", m.Date.UTC().Format("2006-01-02 15:04 MST"))
	p("")
	p("Machine: %s; %s; %s.", machine(), runtime.Version(), s.Nginx)
	p("")
	p("Command: `%s` (`make bench`). Each server is its own process on loopback; the load generator (bench/loadgen.go, Go, "+
		"closed loop) shares the two cores with them. %d keep-alive connections, %d-byte JSON answers, "+
		"%d rounds × %v measured (+%v warm-up) per target, the targets interleaved in each round. gatehouse runs with "+
		"auth, limiter, usage counting and the WAL (fsync) on; its keys' limits are raised so nothing is refused.",
		m.Command, s.cfg.Conns, s.cfg.BodyBytes, s.cfg.Rounds, s.cfg.Duration, s.cfg.Warmup)
	p("")
	stats := make([]Stats, len(s.Targets))
	var bare, nginx float64
	for i, t := range s.Targets {
		stats[i] = t.Stats()
		switch t.Kind {
		case KindBare:
			bare = stats[i].RPS
		case KindNginx:
			nginx = stats[i].RPS
		}
	}
	p("| target | req/s | min–max | p50 | p99 | p999 | server CPU/req | load gen CPU/req | × bare hop | × nginx | errors |")
	p("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for i, t := range s.Targets {
		st := &stats[i]
		ratio := func(base float64) string {
			if t.Kind == KindDirect || t.Kind == KindValidate || base == 0 {
				return "—"
			}
			return fmt.Sprintf("%.2f", st.RPS/base)
		}
		p("| %s | %s | %s–%s | %s | %s | %s | %s | %s | %s | %s | %d |", t.Name, thousands(st.RPS), thousands(st.MinRPS), thousands(st.MaxRPS),
			dur(st.Latency.Quantile(0.5)), dur(st.Latency.Quantile(0.99)), dur(st.Latency.Quantile(0.999)),
			dur(st.CPUPerReq), dur(st.LoadCPUPerReq), ratio(bare), ratio(nginx), st.Errors)
	}
	p("")
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
		case KindValidate:
		default:
			added = dur(h.Quantile(0.99) - direct)
		}
		p("| %s | %s | %s | %s | %s | %s |", t.Name, thousands(t.Latency.Throughput()), dur(h.Quantile(0.5)), dur(h.Quantile(0.99)), dur(h.Quantile(0.999)), added)
	}
	p("")
	p("Targets:")
	p("")
	for _, line := range s.verdicts(stats, bare, nginx, direct) {
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

// verdicts checks the targets against the run.
func (s *Suite) verdicts(stats []Stats, bare, nginx float64, direct time.Duration) []string {
	mark := func(ok bool) string {
		if ok {
			return "✔"
		}
		return "✘"
	}
	var out []string
	for i, t := range s.Targets {
		st := stats[i]
		switch t.Kind {
		case KindGateway:
			vb, vn := st.RPS/bare, st.RPS/nginx
			out = append(out, fmt.Sprintf("%s %s: %.2f× the bare hop (target ≥ %.2f), %s %.2f× nginx (target ≥ %.1f)",
				mark(vb >= minVsBare), t.Name, vb, minVsBare, mark(vn >= minVsNginx), vn, minVsNginx))
			if t.Latency != nil {
				added := t.Latency.Latency.Quantile(0.99) - direct
				out = append(out, fmt.Sprintf("%s %s: p99 added latency %s without queueing (target < %s)",
					mark(added < maxAddedP99), t.Name, dur(added), dur(maxAddedP99)))
			}
		case KindValidate:
			out = append(out, fmt.Sprintf("%s validate: %s req/s (target ≥ %s)", mark(st.RPS >= minValidateRPS), thousands(st.RPS), thousands(minValidateRPS)))
		}
	}
	return out
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
