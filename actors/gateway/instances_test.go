package gateway

import (
	"errors"
	"testing"
)

// TestUserFilesAndInstancesSurviveRestart: USER.md and the instances a
// run created are there after a crash (WAL only) and after a snapshot.
func TestUserFilesAndInstancesSurviveRestart(t *testing.T) {
	n := newNode(t, DefaultConfig(), nil)
	gw := start(n)
	if _, err := gw.CreateProvider(ctx(t), ProviderInput{Name: "echo", ProviderType: ProviderEcho, Enabled: true}); err != nil {
		t.Fatal(err)
	}
	a, err := gw.CreateAgent(ctx(t), "alice", AgentInput{AgentKey: ptr("a"), Provider: ptr("echo"), Model: ptr("m")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := gw.PutUserFile(ctx(t), "alice", "a", "alice", UserFileName, "Alice is a chemist."); err != nil {
		t.Fatal(err)
	}
	if _, err := gw.PutUserFile(ctx(t), "alice", "a", "alice", "SOUL.md", "x"); !errors.Is(err, ErrForbidden) {
		t.Errorf("PutUserFile(SOUL.md) = %v, want ErrForbidden", err)
	}
	gw.RecordRun(Trace{ID: "r1", AgentID: a.ID, UserID: "alice", Status: RunOK, StartedAt: n.Clock.Now()})
	if err := gw.syncRuns(ctx(t)); err != nil {
		t.Fatal(err)
	}
	check := func(stage string) {
		t.Helper()
		if uc, err := gw.UserContext(ctx(t), a.ID, "alice"); err != nil || uc != "Alice is a chemist." {
			t.Errorf("%s: UserContext = %q, %v", stage, uc, err)
		}
		is, err := gw.Instances(ctx(t), "alice", "a")
		if err != nil || len(is) != 1 || is[0].UserID != "alice" || is[0].Runs != 1 || !is[0].CreatedAt.Equal(n.Clock.Now().UTC()) {
			t.Errorf("%s: Instances = %+v, %v", stage, is, err)
		}
	}
	check("live")
	n.Restart()
	gw = n.Exts[0].(*Gateway)
	check("after a crash")
	if _, err := n.Sys.Snapshot(); err != nil {
		t.Fatal(err)
	}
	n.Restart()
	gw = n.Exts[0].(*Gateway)
	check("after a snapshot and a crash")
}
