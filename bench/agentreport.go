package bench

import (
	"fmt"
	"math"
	"runtime"
	"strings"
	"time"
)

// maxQuietP99 is issue 20's target: the quiet user's p99, for GET
// /v1/agents and for a chat, with a noisy neighbour (and no failed chat).
const maxQuietP99 = 5 * time.Millisecond

// Report renders the agent cases' run as a dated section of
// bench/RESULTS.md.
func (s *AgentSuite) Report(m Meta) string {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	title := "agent gateway: noisy-neighbour isolation and the cost of a turn (issue 20)"
	if !s.cfg.Turn && !s.cfg.Isolation {
		title = "two halves: the key service's /health beside the agent gateway's 1 MB chats (issue 35)"
	}
	p("## %s — %s", m.Date.UTC().Format("2006-01-02 15:04 MST"), title)
	p("")
	p("Machine: %s; %s.", machine(), runtime.Version())
	p("")
	p("Command: `%s`. gatehouse is the real binary, its own process with its agent gateway on loopback (WAL with fsync, "+
		"the gateway's per-subject limiter off as by default), an agent per user on the built-in `echo` provider (the two-halves case's: "+
		"an OpenAI-compatible stub); the users call "+
		"with their own operator.write API keys (net/http clients in the suite's process).", m.Command)
	if s.cfg.Vs != "" {
		p("gatehouse@%s is built from that revision and runs each phase right after the working tree's.", s.cfg.Vs)
	}
	p("")
	if s.cfg.Turn {
		s.reportTurns(p)
	}
	if s.cfg.Isolation {
		s.reportIsolation(p)
	}
	if s.cfg.Halves {
		s.reportHalves(p)
	}
	return b.String()
}

// maxHealthP95 is issue 35's target for the two halves: the key
// service's /health p95 while the gateway takes the burst.
const maxHealthP95 = 50 * time.Millisecond

func (s *AgentSuite) reportHalves(p func(string, ...any)) {
	c := s.cfg.Half
	p("**Two halves, one process** (issue 35): `GET /health` on the key service's listener, one probe at a time every %v, "+
		"for %v alone (quiet) and then while %d clients post %d chat completions of one %s-byte user message each to the agent "+
		"gateway of the same process (loaded); the agent runs on an OpenAI-compatible stub in the suite's process that reads "+
		"each request whole and answers at once. %d rounds, the gatehouses alternating; the histograms hold every round.",
		c.ProbeEvery, c.Quiet, c.Senders, c.Messages, thousands(float64(c.MessageBytes)), halvesRounds)
	p("")
	p("| gatehouse | quiet p50 | quiet p95 | loaded p50 | loaded p95 | loaded p99 | loaded max | probes | chats ok | failed | MB/s in | p95 ≤ %v |", maxHealthP95)
	p("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|:-:|")
	for _, h := range s.Halves {
		mbs := "—"
		if h.BurstTime > 0 {
			mbs = fmt.Sprintf("%.0f", float64(h.Sent)*float64(c.MessageBytes)/1e6/h.BurstTime.Seconds())
		}
		verdict := tick(h.Loaded.Count() > 0 && h.Loaded.Quantile(0.95) <= maxHealthP95 && h.ChatFailed == 0 && h.ProbeFailed == 0)
		if h.Baseline {
			verdict = "(baseline)"
		}
		p("| %s | %s | %s | %s | %s | %s | %s | %d | %d | %d | %s | %s |", h.Name, span(h.Quiet.Quantile(0.5)), span(h.Quiet.Quantile(0.95)),
			span(h.Loaded.Quantile(0.5)), span(h.Loaded.Quantile(0.95)), span(h.Loaded.Quantile(0.99)), span(h.Loaded.Max()),
			h.Loaded.Count(), h.Sent, h.ChatFailed+h.ProbeFailed, mbs, verdict)
	}
	for _, h := range s.Halves {
		if h.FirstErr != nil {
			p("")
			p("%s, first failure: %s", h.Name, oneLine(h.FirstErr))
		}
	}
	p("")
}

func (s *AgentSuite) reportTurns(p func(string, ...any)) {
	interleaved := ""
	if len(s.Turns) > 1 {
		interleaved = fmt.Sprintf(", in %d rounds with the gatehouses interleaved", turnRounds)
	}
	p("**Turn cost**: %d sequential `POST /v1/chat/completions` (non-streaming, one user message) of one user with its agent, "+
		"after 5 unmeasured%s; the echo provider answers at once, so this is the gateway's own time per turn. "+
		"WAL records/turn is the increase of `gatehouse_wal_appended_records_total` over the turns, per turn "+
		"(the whole process, measured from %v before the turns to %v after them so that batched records land). "+
		"Registry asks/turn is the increase of `gatehouse_gateway_actor_asks_total{actor=\"registry\"}` (the gateway's /metrics) "+
		"over the turns, per turn: the round trips a turn makes to the registry; — for a build without the counter.", s.cfg.Turns, interleaved, s.cfg.TurnSettle, s.cfg.TurnSettle)
	p("")
	p("| gatehouse | turns | p50 | p99 | max | failed | turns/s | WAL records/turn | registry asks/turn | p50 × baseline |")
	p("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	var base *Turns
	for _, tr := range s.Turns {
		if tr.Baseline {
			base = tr
		}
	}
	for _, tr := range s.Turns {
		h := &tr.Latency
		rate, wal, asks, vs := "—", "—", "—", "—"
		if mean := meanOf(h); mean > 0 {
			rate = thousands(float64(time.Second) / float64(mean))
		}
		if !math.IsNaN(tr.WALPerTurn) {
			wal = fmt.Sprintf("%.2f", tr.WALPerTurn)
		}
		if !math.IsNaN(tr.RegistryAsksPerTurn) {
			asks = fmt.Sprintf("%.2f", tr.RegistryAsksPerTurn)
		}
		if base != nil && !tr.Baseline && base.Latency.Quantile(0.5) > 0 {
			vs = fmt.Sprintf("%.2f", float64(h.Quantile(0.5))/float64(base.Latency.Quantile(0.5)))
		}
		p("| %s | %d | %s | %s | %s | %d | %s | %s | %s | %s |", tr.Name, h.Count(), span(h.Quantile(0.5)), span(h.Quantile(0.99)), span(h.Max()), tr.Failed, rate, wal, asks, vs)
	}
	for _, tr := range s.Turns {
		if tr.FirstErr != nil {
			p("")
			p("%s, first failure: %v", tr.Name, tr.FirstErr)
		}
	}
	p("")
}

func (s *AgentSuite) reportIsolation(p func(string, ...any)) {
	c := s.cfg.Iso
	p("**Noisy neighbour**: user `noisy` saved %s memory entries of %d words (Zipf draws from a 2,000-word vocabulary, "+
		"%d saves at a time); then, for %v each, user `quiet` sends `GET /v1/agents` in one loop and chat completions in another, "+
		"one request at a time each, first **alone** (noisy idle, its entries stored) and then **beside** `noisy` running %d concurrent "+
		"memory searches (`GET /v1/memory?q=<3 words>&agent_id=noisy&limit=10`, closed loops, started %v earlier). Every quiet request "+
		"is in the latencies, failed ones too (client timeout %v); × alone is the p99 beside the neighbour over the p99 alone.",
		thousands(float64(c.Entries)), c.Words, c.Savers, c.Duration, c.Searchers, c.Warmup, c.Timeout)
	p("")
	p("| gatehouse | neighbour | agents n | agents p50 | agents p99 | agents max | agents failed | agents p99 × alone | chats n | chat p50 | chat p99 | chat max | chats failed | chat p99 × alone | searches ok / failed |")
	p("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, iso := range s.Isolations {
		for _, ph := range []struct {
			name string
			st   *QuietStats
		}{{"alone", iso.Alone}, {fmt.Sprintf("%d searches", c.Searchers), iso.Noisy}} {
			if ph.st == nil {
				continue
			}
			st := ph.st
			ratio := func(h, alone *Histogram) string {
				if ph.st == iso.Alone || iso.Alone == nil || alone.Quantile(0.99) == 0 {
					return "—"
				}
				return fmt.Sprintf("%.1f", float64(h.Quantile(0.99))/float64(alone.Quantile(0.99)))
			}
			var aAlone, cAlone *Histogram
			if iso.Alone != nil {
				aAlone, cAlone = &iso.Alone.Agents, &iso.Alone.Chat
			}
			searches := "—"
			if ph.st != iso.Alone {
				searches = fmt.Sprintf("%d / %d", st.Searches, st.SearchesFailed)
			}
			p("| %s | %s | %d | %s | %s | %s | %d | %s | %d | %s | %s | %s | %d | %s | %s |", iso.Name, ph.name,
				st.Agents.Count(), span(st.Agents.Quantile(0.5)), span(st.Agents.Quantile(0.99)), span(st.Agents.Max()), st.AgentsFailed, ratio(&st.Agents, aAlone),
				st.Chat.Count(), span(st.Chat.Quantile(0.5)), span(st.Chat.Quantile(0.99)), span(st.Chat.Max()), st.ChatFailed, ratio(&st.Chat, cAlone), searches)
		}
	}
	p("")
	for _, iso := range s.Isolations {
		if iso.Saved > 0 {
			p("- %s: %s entries saved in %v (%s saves/s).", iso.Name, thousands(float64(iso.Saved)), iso.SaveTime.Round(time.Millisecond), thousands(float64(iso.Saved)/iso.SaveTime.Seconds()))
		}
		for _, st := range []*QuietStats{iso.Alone, iso.Noisy} {
			if st == nil {
				continue
			}
			if st.FirstErr != nil {
				p("- %s: the quiet user's first failure: %v", iso.Name, oneLine(st.FirstErr))
			}
			if st.SearchErr != nil {
				p("- %s: the neighbour's first failed search: %v", iso.Name, oneLine(st.SearchErr))
			}
		}
		if iso.Failed != nil {
			p("- ✘ %s: failed outright: %v", iso.Name, oneLine(iso.Failed))
		}
	}
	p("")
	p("Targets (issue 20, beside the neighbour):")
	p("")
	for _, iso := range s.Isolations {
		if iso.Baseline || iso.Noisy == nil {
			continue
		}
		st := iso.Noisy
		a, ch := st.Agents.Quantile(0.99), st.Chat.Quantile(0.99)
		p("- %s %s: GET /v1/agents p99 %s (target < %s)", tick(a < maxQuietP99), iso.Name, span(a), span(maxQuietP99))
		p("- %s %s: chat p99 %s (target < %s)", tick(ch < maxQuietP99), iso.Name, span(ch), span(maxQuietP99))
		p("- %s %s: %d failed chats of %d (target 0)", tick(st.ChatFailed == 0), iso.Name, st.ChatFailed, st.Chat.Count())
	}
}

// span formats a latency as dur does, and in seconds from 1 s up (a
// quiet user's wait beside a noisy neighbour can be seconds).
func span(d time.Duration) string {
	if d >= time.Second {
		return fmt.Sprintf("%.2f s", d.Seconds())
	}
	return dur(d)
}

func tick(ok bool) string {
	if ok {
		return "✔"
	}
	return "✘"
}

// meanOf estimates the mean of h from its buckets' middles.
func meanOf(h *Histogram) time.Duration {
	if h.n == 0 {
		return 0
	}
	var sum float64
	for i, c := range h.counts {
		if c > 0 {
			sum += float64(c) * float64(bucketMid(i))
		}
	}
	return time.Duration(sum / float64(h.n))
}

// oneLine keeps an error's text to one short line for the report.
func oneLine(err error) string {
	s := strings.Join(strings.Fields(err.Error()), " ")
	if len(s) > 240 {
		s = s[:240] + "…"
	}
	return s
}
