package gateway

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// TestSessionsSurviveRestart: a session's turns are durable once ended;
// history is bounded; a turn begun while another runs waits for it.
func TestSessionsSurviveRestart(t *testing.T) {
	n := newNode(t, DefaultConfig(), nil)
	gw := start(n)
	if _, err := gw.CreateProvider(ctx(t), ProviderInput{Name: "echo", ProviderType: ProviderEcho, Enabled: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := gw.CreateAgent(ctx(t), "alice", AgentInput{AgentKey: ptr("a"), Provider: ptr("echo"), Model: ptr("m")}); err != nil {
		t.Fatal(err)
	}
	if _, err := gw.BeginTurn(ctx(t), "s", "a", "bob", "ws", func() {}); !errors.Is(err, ErrNotFound) {
		t.Errorf("bob's turn with alice's agent = %v, want ErrNotFound", err)
	}
	turn, err := gw.BeginTurn(ctx(t), "s", "a", "alice", "ws", func() {})
	if err != nil || len(turn.Session.Messages) != 0 {
		t.Fatalf("BeginTurn = %+v, %v", turn, err)
	}
	// A second turn waits until the first ends.
	second := make(chan Turn, 1)
	go func() {
		tr, err := gw.BeginTurn(context.Background(), "s", "", "alice", "ws", func() {})
		if err != nil {
			t.Error(err)
		}
		second <- tr
	}()
	select {
	case <-second:
		t.Fatal("a second turn began while the first ran")
	default:
	}
	if _, err := gw.EndTurn(ctx(t), "alice", "s", TurnResult{User: "q1", Assistant: "a1", PromptTokens: 2, CompletionTokens: 1}); err != nil {
		t.Fatal(err)
	}
	if tr := <-second; len(tr.Session.Messages) != 2 {
		t.Errorf("the second turn saw %d messages, want the first turn's 2", len(tr.Session.Messages))
	}
	if _, err := gw.EndTurn(ctx(t), "alice", "s", TurnResult{User: strings.Repeat("x", MaxSessionBytes), Failed: true}); err != nil {
		t.Fatal(err)
	}
	n.Restart()
	gw = n.Exts[0].(*Gateway)
	s, err := gw.SessionOp(ctx(t), "get", "s", "alice", false, nil)
	if err != nil || len(s.Messages) != 1 || s.PromptTokens != 2 || s.Channel != "ws" {
		t.Errorf("after restart = %d messages, %+v, %v; want the last (bounded) message and the token counts", len(s.Messages), s.PromptTokens, err)
	}
	if _, err := gw.SessionOp(ctx(t), "get", "s", "bob", false, nil); !errors.Is(err, ErrNotFound) {
		t.Errorf("bob reading alice's session = %v", err)
	}
	// Deleting the agent takes its sessions and users' files with it.
	if _, err := gw.PutUserFile(ctx(t), "alice", "a", "alice", UserFileName, "x"); err != nil {
		t.Fatal(err)
	}
	if err := gw.DeleteAgent(ctx(t), "alice", "a"); err != nil {
		t.Fatal(err)
	}
	n.Restart()
	gw = n.Exts[0].(*Gateway)
	if _, err := gw.SessionOp(ctx(t), "get", "s", "alice", false, nil); !errors.Is(err, ErrNotFound) {
		t.Errorf("session of a deleted agent = %v, want ErrNotFound", err)
	}
	if ss, total, err := gw.ListSessions(ctx(t), SessionFilter{}, true); err != nil || total != 0 {
		t.Errorf("sessions after deleting the agent = %d %v %v", total, ss, err)
	}
}
