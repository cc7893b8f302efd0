package gateway

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestWSSessions: chat.send keeps a durable conversation per session key
// (history to the provider, events around the run), sends on one session
// run one after the other, chat.abort cancels the running one, history,
// preview, patch, reset and delete work, GET /v1/sessions lists it, and
// another user cannot see it.
func TestWSSessions(t *testing.T) {
	e := newGWEnv(t, gwOpts{token: gwToken})
	e.seedAgent("default", `{"delay_ms":1}`, "") // alice's, echo
	e.must(201, "POST", "/v1/providers", gwToken, `{"name":"slow","provider_type":"echo","settings":{"delay_ms":300}}`)
	e.must(201, "POST", "/v1/agents", gwToken, `{"agent_key":"slow","provider":"slow","model":"m"}`, as("alice")...)
	w := dialWS(t, e)
	w.mustOK("connect", map[string]any{"token": gwToken, "user_id": "alice"})

	res, events := w.call("chat.send", map[string]any{"agentId": "default", "sessionKey": "s1", "message": "one two", "stream": true})
	if !res.OK {
		t.Fatalf("chat.send = %+v", res.Error)
	}
	var kinds []string
	for _, ev := range events {
		var p struct{ Kind string }
		_ = json.Unmarshal(ev.Payload, &p)
		kinds = append(kinds, ev.Event+":"+p.Kind)
	}
	got := strings.Join(kinds, " ")
	if !strings.HasPrefix(got, "agent:run.started chat:chunk") || !strings.HasSuffix(got, "chat:message agent:run.completed") {
		t.Errorf("events = %s", got)
	}

	// Two sends at once on one session: the second waits for the first.
	a := w.send("chat.send", map[string]any{"sessionKey": "s1", "message": "three"})
	b := w.send("chat.send", map[string]any{"sessionKey": "s1", "message": "four"})
	done := map[string]bool{}
	for len(done) < 2 {
		f, err := w.next()
		if err != nil {
			t.Fatal(err)
		}
		if f.Type == "res" && (f.ID == a || f.ID == b) {
			if !f.OK {
				t.Fatalf("concurrent send = %+v", f.Error)
			}
			done[f.ID] = true
		}
	}
	var hist struct {
		Messages []struct{ Role, Content string }
	}
	if err := json.Unmarshal(w.mustOK("chat.history", map[string]any{"sessionKey": "s1"}), &hist); err != nil {
		t.Fatal(err)
	}
	var turns []string
	for _, m := range hist.Messages {
		turns = append(turns, m.Role+":"+m.Content)
	}
	want := "user:one two assistant:echo: one two user:three assistant:echo: three user:four assistant:echo: four"
	if strings.Join(turns, " ") != want {
		t.Errorf("history = %v\nwant %s", turns, want)
	}

	// Abort: the running turn ends failed, its question kept.
	id := w.send("chat.send", map[string]any{"agentId": "slow", "sessionKey": "s2", "message": "a b c d e f g h", "stream": true})
	for {
		f, err := w.next()
		if err != nil {
			t.Fatal(err)
		}
		if f.Type == "event" && f.ID == id {
			break // the run started
		}
	}
	abortID := w.send("chat.abort", map[string]any{"sessionKey": "s2"})
	var aborted, answered bool
	for !aborted || !answered {
		f, err := w.next()
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case f.Type == "res" && f.ID == abortID:
			aborted = f.OK
			if !f.OK {
				t.Fatalf("chat.abort = %+v", f.Error)
			}
		case f.Type == "res" && f.ID == id:
			answered = true
			if f.OK || f.Error.Code != codePrecondition {
				t.Errorf("aborted send = %+v, want FAILED_PRECONDITION", f)
			}
		}
	}

	page := e.must(200, "GET", "/v1/sessions", gwToken, "", as("alice")...)
	if page.body["total"] != 2.0 || !strings.Contains(page.raw, `"key":"s1"`) || !strings.Contains(page.raw, `"message_count":6`) {
		t.Errorf("GET /v1/sessions = %s", page.raw)
	}
	if p := e.must(200, "GET", "/v1/sessions?limit=1&offset=1", gwToken, "", as("alice")...); len(p.body["data"].([]any)) != 1 || p.body["total"] != 2.0 {
		t.Errorf("page 2 = %s", p.raw)
	}
	e.must(400, "GET", "/v1/sessions?limit=500", gwToken, "", as("alice")...)
	if p := e.must(200, "GET", "/v1/sessions", gwToken, "", as("bob")...); p.body["total"] != 0.0 {
		t.Errorf("bob's sessions = %s", p.raw)
	}

	w.mustOK("sessions.patch", map[string]any{"key": "s1", "label": "numbers"})
	var prev struct{ Label string }
	_ = json.Unmarshal(w.mustOK("sessions.preview", map[string]any{"key": "s1"}), &prev)
	if prev.Label != "numbers" {
		t.Errorf("preview label = %q", prev.Label)
	}
	var reset struct {
		MessageCount int `json:"message_count"`
	}
	_ = json.Unmarshal(w.mustOK("sessions.reset", map[string]any{"key": "s1"}), &reset)
	if reset.MessageCount != 0 {
		t.Errorf("after reset: %d messages", reset.MessageCount)
	}

	bob := dialWS(t, e)
	bob.mustOK("connect", map[string]any{"token": gwToken, "user_id": "bob"})
	if f, _ := bob.call("chat.history", map[string]any{"sessionKey": "s1"}); f.OK || f.Error.Code != codeNotFound {
		t.Errorf("bob reading alice's session = %+v, want NOT_FOUND", f)
	}
	if f, _ := bob.call("chat.send", map[string]any{"sessionKey": "s1", "message": "hi"}); f.OK || f.Error.Code != codeNotFound {
		t.Errorf("bob sending on alice's session = %+v, want NOT_FOUND", f)
	}
	w.mustOK("sessions.delete", map[string]any{"key": "s1"})
	if f, _ := w.call("chat.history", map[string]any{"sessionKey": "s1"}); f.OK {
		t.Errorf("history of a deleted session = %+v", f)
	}
}

// TestWakeWithSession: wake with a session_key is a turn of that session.
func TestWakeWithSession(t *testing.T) {
	e := newGWEnv(t, gwOpts{token: gwToken})
	e.seedAgent("default", `{"delay_ms":1}`, "")
	for _, m := range []string{"first", "second"} {
		r := e.must(200, "POST", "/v1/agents/default/wake", gwToken, `{"message":"`+m+`","session_key":"w1"}`, as("alice")...)
		if r.body["content"] != "echo: "+m {
			t.Errorf("wake = %s", r.raw)
		}
	}
	page := e.must(200, "GET", "/v1/sessions?channel=http", gwToken, "", as("alice")...)
	if page.body["total"] != 1.0 || !strings.Contains(page.raw, `"message_count":4`) {
		t.Errorf("sessions after two wakes = %s", page.raw)
	}
	e.must(404, "POST", "/v1/agents/default/wake", gwToken, `{"message":"x","session_key":"w1"}`, as("bob")...)
}
