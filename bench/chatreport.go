package bench

import (
	"fmt"
	"strings"
)

// Report renders the chat case as a Markdown section: one row per
// (target, streamed, conns), then issue 35's chat-path targets, each met
// or missed by how much.
func (s *ChatSuite) Report(m Meta) string {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	p("## Chat path, CPU per request (issue 35) — %s\n\n", m.Date.UTC().Format("2006-01-02 15:04 UTC"))
	p("`%s`\n\n", m.Command)
	p("Machine: %s. Load average when the case began: %s. Tool schemas in the upstream requests gatehouse sent: %v.\n", machine(), s.loadBefore, s.sawTools)
	p("POST /v1/chat/completions on an agent (its built-in tools, durable traces on) whose openai_compat provider is an instant stub in the suite's process (chunked SSE flushed event by event when streamed); "+
		"the bare forwarder decodes the JSON body, encodes it again, forwards it with a pooled net/http client and copies the answer back. "+
		"%d rounds of %v (after %v warm-up) per cell, the targets interleaved; CPU = the target process's utime+stime over the measured window per request, cheapest round; "+
		"req/s best round; new upstream connections = connections the stub accepted in the window per 1,000 calls, worst round; p50 median of rounds.\n\n",
		s.cfg.Rounds, s.cfg.Duration, s.cfg.Warmup)
	p("| target | streamed | conns | req/s | CPU/req | vs forwarder | new upstream conns / 1,000 | p50 | p50 added over stub | errors |\n")
	p("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	fwd := s.target("forwarder", false)
	stub := s.target("stub", false)
	for _, conns := range s.cfg.Conns {
		for _, stream := range []bool{false, true} {
			key := chatCell{stream, conns}
			for _, t := range s.Targets {
				c := t.Cells[key]
				if c == nil {
					continue
				}
				if len(c.Rounds) == 0 {
					p("| %s | %v | %d | failed: %v | | | | | | |\n", t.Name, stream, conns, c.Err)
					continue
				}
				cpu, rps, perK, p50 := c.best()
				vsFwd, added := "", ""
				if fc := fwd.cell(key); fc != nil && t.Kind != "stub" && t.Kind != "forwarder" {
					fcpu, _, _, _ := fc.best()
					vsFwd = ratioOf(float64(cpu), float64(fcpu))
				}
				if sc := stub.cell(key); sc != nil && conns == 1 && t.Kind != "stub" {
					_, _, _, sp50 := sc.best()
					added = dur(p50 - sp50)
				}
				cpuText := cpuDur(cpu)
				if t.proc == nil {
					cpuText = "—"
				}
				var errs int64
				for _, r := range c.Rounds {
					errs += r.Errors
				}
				p("| %s | %v | %d | %s | %s | %s | %.1f | %s | %s | %d |\n", t.Name, stream, conns, thousands(rps), cpuText, vsFwd, perK, dur(p50), added, errs)
			}
		}
	}
	p("\n")
	for _, v := range s.verdicts() {
		p("- %s\n", v)
	}
	if m.Extra != "" {
		p("\n%s", m.Extra)
	}
	return b.String()
}

func (s *ChatSuite) target(kind string, baseline bool) *ChatTarget {
	for _, t := range s.Targets {
		if t.Kind == kind && t.Baseline == baseline {
			return t
		}
	}
	return nil
}

func (t *ChatTarget) cell(k chatCell) *ChatCell {
	if t == nil || t.Cells[k] == nil || len(t.Cells[k].Rounds) == 0 {
		return nil
	}
	return t.Cells[k]
}

// verdicts are issue 35's chat-path targets for the working tree's
// gatehouse: CPU per request against the -vs build, the upstream
// connections it opens, and the p50 it adds at one connection.
func (s *ChatSuite) verdicts() []string {
	cur, base, stub := s.target("gatehouse", false), s.target("gatehouse", true), s.target("stub", false)
	var out []string
	maxConns := s.cfg.Conns[len(s.cfg.Conns)-1]
	type goal struct {
		stream bool
		conns  int
		cut    float64
	}
	goals := []goal{{true, maxConns, 0.25}, {true, 1, 0.25}, {false, 1, 0.25}, {false, maxConns, 0.10}}
	for _, g := range goals {
		what := fmt.Sprintf("CPU per request, %s at %d conn(s), at least %.0f %% lower than %s", streamWord(g.stream), g.conns, g.cut*100, s.cfg.Vs)
		c, bc := cur.cell(chatCell{g.stream, g.conns}), base.cell(chatCell{g.stream, g.conns})
		if base == nil || c == nil || bc == nil {
			out = append(out, what+": not measured")
			continue
		}
		cpu, _, _, _ := c.best()
		bcpu, _, _, _ := bc.best()
		lower := 1 - float64(cpu)/float64(bcpu)
		out = append(out, fmt.Sprintf("%s: %s vs %s, %.1f %% lower — %s", what, cpuDur(cpu), cpuDur(bcpu), lower*100, metOrMissed(lower >= g.cut, fmt.Sprintf("%.1f points", (g.cut-lower)*100))))
	}
	for _, conns := range s.cfg.Conns {
		for _, stream := range []bool{false, true} {
			c := cur.cell(chatCell{stream, conns})
			if c == nil {
				continue
			}
			_, _, perK, _ := c.best()
			out = append(out, fmt.Sprintf("New upstream connections, %s at %d conn(s), ≤ 5 per 1,000 calls: %.1f — %s",
				streamWord(stream), conns, perK, metOrMissed(perK <= 5, fmt.Sprintf("%.1f per 1,000", perK-5))))
		}
	}
	for _, stream := range []bool{false, true} {
		c, sc := cur.cell(chatCell{stream, 1}), stub.cell(chatCell{stream, 1})
		if c == nil || sc == nil {
			continue
		}
		_, _, _, p50 := c.best()
		_, _, _, sp50 := sc.best()
		out = append(out, fmt.Sprintf("p50 added over calling the stub directly, %s at 1 conn: %s (%s against %s) — reported", streamWord(stream), dur(p50-sp50), dur(p50), dur(sp50)))
	}
	return out
}

func streamWord(stream bool) string {
	if stream {
		return "streamed"
	}
	return "non-streamed"
}

func metOrMissed(met bool, by string) string {
	if met {
		return "**met**"
	}
	return "**missed** by " + by
}
