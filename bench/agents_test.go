package bench

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"
)

// TestAgentCases runs the agent gateway's cases (turn, isolation) for a
// moment against the real binary, to keep them compiling and working; it
// checks what was done and counted, never how fast.
func TestAgentCases(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cfg := AgentConfig{
		Isolation: true, Turn: true, Turns: 5, TurnSettle: 0, Dir: t.TempDir(), Log: logWriter{t},
		Iso: IsolationConfig{Entries: 40, Words: 50, Savers: 4, Searchers: 2, Duration: 100 * time.Millisecond, Warmup: 20 * time.Millisecond, Timeout: 30 * time.Second},
	}
	s, err := StartAgents(ctx, cfg)
	if err != nil {
		t.Fatalf("StartAgents: %v", err)
	}
	t.Cleanup(s.Stop)
	if err := s.Run(ctx); err != nil {
		t.Fatalf("Run: %v", err)
	}

	if len(s.Turns) != 1 {
		t.Fatalf("Turns = %d cases, want 1", len(s.Turns))
	}
	tr := s.Turns[0]
	if tr.Latency.Count() != 5 || tr.Failed != 0 || math.IsNaN(tr.WALPerTurn) || tr.WALPerTurn < 0 {
		t.Errorf("turns: n %d, failed %d (%v), WAL records/turn %v; want 5, 0, a count", tr.Latency.Count(), tr.Failed, tr.FirstErr, tr.WALPerTurn)
	}

	if len(s.Isolations) != 1 {
		t.Fatalf("Isolations = %d cases, want 1", len(s.Isolations))
	}
	iso := s.Isolations[0]
	if iso.Failed != nil || iso.Saved != 40 {
		t.Fatalf("isolation: saved %d, failed %v; want 40, nil", iso.Saved, iso.Failed)
	}
	for name, st := range map[string]*QuietStats{"alone": iso.Alone, "beside the neighbour": iso.Noisy} {
		if st == nil {
			t.Fatalf("%s: not run", name)
		}
		if st.Agents.Count() < 1 || st.Chat.Count() < 1 || st.AgentsFailed != 0 || st.ChatFailed != 0 {
			t.Errorf("%s: agents %d (failed %d), chats %d (failed %d), first error %v", name,
				st.Agents.Count(), st.AgentsFailed, st.Chat.Count(), st.ChatFailed, st.FirstErr)
		}
	}
	if n := iso.Noisy.Searches; n < int64(cfg.Iso.Searchers) || iso.Noisy.SearchesFailed != 0 {
		t.Errorf("searches = %d ok, %d failed (%v); want >= %d ok, 0 failed", n, iso.Noisy.SearchesFailed, iso.Noisy.SearchErr, cfg.Iso.Searchers)
	}
	if iso.Alone.Searches != 0 {
		t.Errorf("searches while alone = %d, want 0", iso.Alone.Searches)
	}

	report := s.Report(Meta{Date: time.Now(), Command: "test"})
	for _, want := range []string{"| gatehouse | 5 |", "| gatehouse | alone |", "| gatehouse | 2 searches |", "Targets (issue 20"} {
		if !strings.Contains(report, want) {
			t.Errorf("Report() lacks %q:\n%s", want, report)
		}
	}
}

func TestMemoryText(t *testing.T) {
	a, b := MemoryText(7, 200), MemoryText(7, 200)
	if a != b || len(strings.Fields(a)) != 200 {
		t.Errorf("MemoryText(7, 200) = %d words, deterministic %v; want 200, true", len(strings.Fields(a)), a == b)
	}
	if MemoryText(8, 200) == a {
		t.Error("MemoryText(8, 200) = MemoryText(7, 200), want different entries")
	}
}

func TestPromValue(t *testing.T) {
	text := []byte("# HELP gatehouse_wal_appended_records_total x\n# TYPE gatehouse_wal_appended_records_total counter\n" +
		"gatehouse_wal_appended_records_total{log=\"a b\"} 12\ngatehouse_wal_appended_records_total{log=\"c\"} 3 1700000000\n" +
		"gatehouse_wal_appended_records_totally 99\n")
	if got, ok := promValue(text, "gatehouse_wal_appended_records_total"); got != 15 || !ok {
		t.Errorf("promValue() = %v, %v; want 15, true", got, ok)
	}
	if _, ok := promValue(text, "gatehouse_missing"); ok {
		t.Error("promValue(missing) found it")
	}
}

// logWriter sends the suite's progress lines to t.Log.
type logWriter struct{ tb testing.TB }

func (w logWriter) Write(p []byte) (int, error) {
	w.tb.Helper()
	w.tb.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
