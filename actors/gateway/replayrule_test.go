package gateway

import (
	"fmt"
	"testing"

	"github.com/google/uuid"
)

// TestReplayRule checks the rule of actors.Extension for every record type
// this build writes: a section captured at any point j at or after its
// barrier k (the System cuts at a barrier while actors keep applying),
// restored and followed by the replay of every record after k, equals the
// state that applied every record once. Records that add to a state
// (turns, runs) pass only because they carry a watermark; full-state
// saves and deletes pass because applying one again changes nothing.
func TestReplayRule(t *testing.T) {
	evs := replayEvents()
	live := applied(t, evs, len(evs)).encode()
	for k := 0; k <= len(evs); k++ {
		for j := k; j <= len(evs); j++ {
			st := newState(DefaultConfig())
			if err := restoreSection(applied(t, evs, j).encode(), st); err != nil {
				t.Fatal(err)
			}
			for i := k; i < len(evs); i++ {
				st.apply(uint64(i+1), fresh(t, evs[i]))
			}
			sameState(t, fmt.Sprintf("section at %d (barrier %d) then replay after %d", j, k, k), live, st.encode())
		}
	}
}

// replayEvents are the golden records plus what makes them interact: a
// second turn, a save of a session that a turn follows, deletes of a
// session and a memory entry, an audit entry of a tenant shard.
func replayEvents() []event {
	var evs []event
	for _, g := range goldenEvents() {
		evs = append(evs, g.ev)
	}
	turn := func(n int64) event {
		return sessionTurnAppended{&turnJSON{V: turnVersion, SessionID: legacySessionID("s-1"), PromptTokens: n, CompletionTokens: n, At: fxAt,
			Messages: []SessionMessage{{Role: "user", Content: fmt.Sprint("q", n), At: fxAt}}}}
	}
	s2 := &sessionRec{ID: legacySessionID("s-2"), Key: "s-2", AgentID: fxAgent, UserID: "bob", Channel: "http", CreatedAt: fxAt, UpdatedAt: fxAt}
	audit := &activityRec{Activity: Activity{ID: uuid.MustParse("019ab000-0000-7000-8000-0000000000a9"), At: fxAt, ActorType: ActorToken,
		ActorID: "gateway_token", UserID: "bob", Action: "session.delete", EntityType: "session", EntityID: "s-2"}, Tenant: sessionTenant("bob")}
	return append(evs, turn(5), entitySaved{s2}, turn(7), sessionTurnAppended{&turnJSON{V: turnVersion, SessionID: s2.ID, PromptTokens: 2, At: fxAt}},
		entityDeleted{kind: kindSession, id: s2.ID}, entitySaved{audit},
		entityDeleted{kind: kindMemory, id: uuid.MustParse("019ab000-0000-7000-8000-0000000000e1")}, runRecorded{fxRuns()[0]})
}

// applied is a new state with the first n events applied at seq 1..n.
func applied(t *testing.T, evs []event, n int) *state {
	t.Helper()
	st := newState(DefaultConfig())
	for i := range n {
		st.apply(uint64(i+1), fresh(t, evs[i]))
	}
	return st
}

// fresh decodes ev's record again: applied entities are owned by the
// state that applied them.
func fresh(t *testing.T, ev event) event {
	t.Helper()
	e, err := decodeEvent(ev.record())
	if err != nil {
		t.Fatal(err)
	}
	return e
}
