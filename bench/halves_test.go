package bench

import (
	"context"
	"strings"
	"testing"
	"time"
)

// halvesBound is TestHalvesHealth's bound on /health's p95 under the
// burst: issue 35's target is 50 ms (the suite reports it); a test on a
// shared machine asserts five times that.
const halvesBound = 250 * time.Millisecond

// TestHalvesHealth runs the two-halves case against the real binary: the
// key service's /health, probed while 32 clients post 1 MB chat messages
// to the agent gateway of the same process, keeps its p95 under
// halvesBound, and every message and probe succeeds.
func TestHalvesHealth(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and loads the real binary")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cfg := AgentConfig{Halves: true, Dir: t.TempDir(), Log: logWriter{t},
		Half: HalvesConfig{MessageBytes: 1_000_000, Senders: 32, Messages: 160, ProbeEvery: 5 * time.Millisecond, Quiet: 300 * time.Millisecond, Timeout: time.Minute}}
	s, err := StartAgents(ctx, cfg)
	if err != nil {
		t.Fatalf("StartAgents: %v", err)
	}
	t.Cleanup(s.Stop)
	if err := s.Run(ctx); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if len(s.Halves) != 1 {
		t.Fatalf("Halves = %d cases, want 1", len(s.Halves))
	}
	h := s.Halves[0]
	if want := halvesRounds * cfg.Half.Messages; h.Sent != want || h.ChatFailed != 0 || h.ProbeFailed != 0 {
		t.Fatalf("sent %d, failed %d chats and %d probes (%v); want %d, 0, 0", h.Sent, h.ChatFailed, h.ProbeFailed, h.FirstErr, want)
	}
	if h.Quiet.Count() == 0 || h.Loaded.Count() == 0 {
		t.Fatalf("probes: %d quiet, %d loaded; want some of each", h.Quiet.Count(), h.Loaded.Count())
	}
	if p95 := h.Loaded.Quantile(0.95); p95 > halvesBound {
		t.Errorf("/health p95 during the burst = %v (p50 %v, max %v, %d probes), want <= %v",
			p95, h.Loaded.Quantile(0.5), h.Loaded.Max(), h.Loaded.Count(), halvesBound)
	}
	report := s.Report(Meta{Date: time.Now(), Command: "test"})
	if !strings.Contains(report, "**Two halves, one process**") || !strings.Contains(report, "| gatehouse |") {
		t.Errorf("Report() lacks the two-halves table:\n%s", report)
	}
}
