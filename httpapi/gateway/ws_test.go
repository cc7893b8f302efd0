package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/fasthttp/websocket"
)

// wsClient is a test client of /ws.
type wsClient struct {
	tb testing.TB
	c  *websocket.Conn
	id int
}

func dialWS(tb testing.TB, e *gwEnv) *wsClient {
	tb.Helper()
	url := "ws" + strings.TrimPrefix(e.url, "http") + "/ws"
	c, resp, err := websocket.DefaultDialer.Dial(url, nil)
	if err != nil {
		tb.Fatalf("dial %s: %v", url, err)
	}
	_ = resp.Body.Close()
	tb.Cleanup(func() { _ = c.Close() })
	return &wsClient{tb: tb, c: c}
}

// frame is a decoded server frame.
type frame struct {
	Type    string          `json:"type"`
	ID      string          `json:"id"`
	OK      bool            `json:"ok"`
	Payload json.RawMessage `json:"payload"`
	Error   *ErrorDetail    `json:"error"`
	Event   string          `json:"event"`
	Seq     uint64          `json:"seq"`
}

func (w *wsClient) send(method string, params any) string {
	w.tb.Helper()
	w.id++
	id := string(rune('a'+w.id%26)) + strings.Repeat("x", w.id/26)
	b, _ := json.Marshal(map[string]any{"type": "req", "id": id, "method": method, "params": params})
	if err := w.c.WriteMessage(websocket.TextMessage, b); err != nil {
		w.tb.Fatalf("write: %v", err)
	}
	return id
}

// next reads one frame (error: the connection closed).
func (w *wsClient) next() (frame, error) {
	var f frame
	_ = w.c.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, b, err := w.c.ReadMessage()
	if err != nil {
		return f, err
	}
	if err := json.Unmarshal(b, &f); err != nil {
		w.tb.Fatalf("frame %s: %v", b, err)
	}
	return f, nil
}

// call sends a request and returns its response, collecting the events
// that came before it.
func (w *wsClient) call(method string, params any) (frame, []frame) {
	w.tb.Helper()
	id := w.send(method, params)
	var events []frame
	for {
		f, err := w.next()
		if err != nil {
			w.tb.Fatalf("%s: %v", method, err)
		}
		if f.Type == "event" {
			events = append(events, f)
			continue
		}
		if f.ID != id {
			w.tb.Fatalf("%s: response for %q, want %q", method, f.ID, id)
		}
		return f, events
	}
}

func (w *wsClient) mustOK(method string, params any) json.RawMessage {
	w.tb.Helper()
	f, _ := w.call(method, params)
	if !f.OK {
		w.tb.Fatalf("%s = %+v, want ok", method, f.Error)
	}
	return f.Payload
}

// closeCode waits for the server to close and returns its code.
func (w *wsClient) closeCode() int {
	w.tb.Helper()
	for {
		_, err := w.next()
		var ce *websocket.CloseError
		if errors.As(err, &ce) {
			return ce.Code
		}
		if err != nil {
			w.tb.Fatalf("read until close: %v", err)
		}
	}
}

func TestWSConnectFirst(t *testing.T) {
	e := newGWEnv(t, gwOpts{token: gwToken})
	tests := []struct {
		name, method string
		params       any
		code         string
	}{
		{"another method first", "providers.list", nil, codeUnauthorized},
		{"no token", "connect", map[string]any{}, codeUnauthorized},
		{"bad token", "connect", map[string]any{"token": "gateway_00000000000000000000000000000000"}, codeUnauthorized},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := dialWS(t, e)
			f, _ := w.call(tt.method, tt.params)
			if f.OK || f.Error == nil || f.Error.Code != tt.code {
				t.Fatalf("= %+v, want %s", f, tt.code)
			}
			if code := w.closeCode(); code != websocket.ClosePolicyViolation {
				t.Errorf("close code = %d, want %d", code, websocket.ClosePolicyViolation)
			}
		})
	}
}

// TestWSRPC: over one connection, the routes of the table by their RPC
// names, with HTTP's scopes, user binding, errors in the connection's
// language, and a streamed chat as event frames.
func TestWSRPC(t *testing.T) {
	e := newGWEnv(t, gwOpts{token: gwToken})
	admin := dialWS(t, e)
	var hello wsHello
	if err := json.Unmarshal(admin.mustOK("connect", map[string]any{"token": gwToken, "user_id": "alice"}), &hello); err != nil {
		t.Fatal(err)
	}
	if hello.Protocol != 1 || hello.Role != "admin" || hello.UserID != "alice" || hello.Server.Name != "gatehouse" {
		t.Errorf("connect = %+v", hello)
	}
	admin.mustOK("providers.create", map[string]any{"name": "echo", "provider_type": "echo", "settings": map[string]any{"delay_ms": 1}})
	admin.mustOK("agents.create", map[string]any{"agent_key": "default", "provider": "echo", "model": "m"})
	var got struct {
		Data []struct {
			AgentKey string `json:"agent_key"`
		}
	}
	if err := json.Unmarshal(admin.mustOK("agents.list", nil), &got); err != nil || len(got.Data) != 1 || got.Data[0].AgentKey != "default" {
		t.Fatalf("agents.list = %+v, %v", got, err)
	}
	var key struct{ Key string }
	if err := json.Unmarshal(admin.mustOK("api_keys.create", map[string]any{"name": "r", "scopes": []string{"operator.read"}, "user_id": "alice"}), &key); err != nil {
		t.Fatal(err)
	}
	if f, _ := admin.call("no.such.method", nil); f.OK || f.Error.Code != codeNotFound {
		t.Errorf("unknown method = %+v, want NOT_FOUND", f)
	}
	if f, _ := admin.call("agents.get", map[string]any{"id": "nope"}); f.OK || f.Error.Code != codeNotFound {
		t.Errorf("agents.get(nope) = %+v, want NOT_FOUND", f)
	}

	// Streaming: chat.completions with stream:true arrives as chunk events
	// of the request, then its response.
	res, events := admin.call("chat.completions", map[string]any{"model": "gateway:default", "stream": true,
		"messages": []map[string]string{{"role": "user", "content": "one two three"}}})
	if !res.OK || len(events) < 4 {
		t.Fatalf("streamed chat = %+v with %d events", res, len(events))
	}
	var text strings.Builder
	for i, ev := range events {
		if ev.ID != res.ID || ev.Event != "chunk" || (i > 0 && ev.Seq <= events[i-1].Seq) {
			t.Fatalf("event %d = %+v", i, ev)
		}
		var c chatChunk
		if json.Unmarshal(ev.Payload, &c) == nil && len(c.Choices) > 0 {
			text.WriteString(c.Choices[0].Delta.Content)
		}
	}
	if !strings.Contains(text.String(), "one two three") {
		t.Errorf("streamed text = %q", text.String())
	}

	// A read key: its scope and its user, as over HTTP; errors in Vietnamese.
	reader := dialWS(t, e)
	if f, _ := reader.call("connect", map[string]any{"token": key.Key, "user_id": "bob"}); f.OK || f.Error.Code != codeUnauthorized {
		t.Fatalf("read key connecting as bob = %+v, want UNAUTHORIZED", f)
	}
	reader = dialWS(t, e)
	reader.mustOK("connect", map[string]any{"token": key.Key, "locale": "vi"})
	f, _ := reader.call("providers.create", map[string]any{"name": "x", "provider_type": "echo"})
	if f.OK || f.Error.Code != codeUnauthorized || !strings.Contains(f.Error.Message, "thiếu quyền") {
		t.Errorf("read key providers.create = %+v, want UNAUTHORIZED in vi", f.Error)
	}
	reader.mustOK("agents.get", map[string]any{"id": "default"})
}

func TestWSLimitsAndShutdown(t *testing.T) {
	e := newGWEnv(t, gwOpts{token: gwToken})
	big := dialWS(t, e)
	big.mustOK("connect", map[string]any{"token": gwToken})
	if err := big.c.WriteMessage(websocket.TextMessage, []byte(`{"type":"req","id":"1","method":"health","params":"`+strings.Repeat("x", wsMaxFrame)+`"}`)); err != nil {
		t.Fatal(err)
	}
	if code := big.closeCode(); code != websocket.CloseMessageTooBig {
		t.Errorf("oversized frame: close code %d, want %d", code, websocket.CloseMessageTooBig)
	}
	// The websocket library writes that close frame itself, before the
	// read returns to the session, which frees the slot a moment later
	// (seen in a fresh-clone CI run): wait for it.
	for deadline := time.Now().Add(5 * time.Second); ; {
		e.srv.ws.mu.Lock()
		n := len(e.srv.ws.conns)
		e.srv.ws.mu.Unlock()
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the oversized frame's connection still holds its slot")
		}
		time.Sleep(time.Millisecond)
	}

	var conns []*wsClient
	for range wsConnsPerCred {
		w := dialWS(t, e)
		w.mustOK("connect", map[string]any{"token": gwToken})
		conns = append(conns, w)
	}
	extra := dialWS(t, e)
	if f, _ := extra.call("connect", map[string]any{"token": gwToken}); f.OK || f.Error.Code != codeExhausted {
		t.Errorf("connection %d of one credential = %+v, want RESOURCE_EXHAUSTED", wsConnsPerCred+1, f)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- e.srv.Shutdown(ctx) }()
	w := conns[0]
	ev, err := w.next()
	if err != nil || ev.Type != "event" || ev.Event != "shutdown" {
		t.Fatalf("on shutdown = %+v, %v; want a shutdown event", ev, err)
	}
	if code := w.closeCode(); code != websocket.CloseGoingAway {
		t.Errorf("close code on shutdown = %d, want %d", code, websocket.CloseGoingAway)
	}
	if err := <-done; err != nil {
		t.Errorf("Shutdown = %v", err)
	}
}

// TestWSNodeClient drives /ws with the ws npm client (pinned in
// testdata/gwclient): connect, a list, a streamed chat, a denied scope.
func TestWSNodeClient(t *testing.T) {
	e := newGWEnv(t, gwOpts{token: gwToken})
	e.seedAgent("default", `{"delay_ms":1}`, "")
	e.must(201, "POST", "/v1/providers", gwToken, `{"name":"slow","provider_type":"echo","settings":{"delay_ms":200}}`)
	e.must(201, "POST", "/v1/agents", gwToken, `{"agent_key":"slow","provider":"slow","model":"m"}`, as("alice")...)
	read := e.must(201, "POST", "/v1/api-keys", gwToken, `{"name":"r","scopes":["operator.read"],"user_id":"alice"}`).body["key"].(string)
	out := nodeScript(t, nil, "ws.mjs", "ws"+strings.TrimPrefix(e.url, "http")+"/ws", gwToken, read)
	var got struct {
		Connect struct {
			OK         bool
			Role, User string
		}
		Agents []string
		Stream struct {
			OK     bool
			Text   string
			Events int
		}
		Denied struct {
			OK            bool
			Code, Message string
		}
		Session struct {
			OK              bool
			Content         string
			Chunks          int
			RunEvents       []string
			History, Listed int
		}
		Abort struct {
			OK, SendOk bool
			Code       string
		}
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("node output %s: %v", out, err)
	}
	if !got.Connect.OK || got.Connect.Role != "admin" || got.Connect.User != "alice" {
		t.Errorf("connect = %+v", got.Connect)
	}
	if strings.Join(got.Agents, ",") != "default,slow" {
		t.Errorf("agents.list = %v", got.Agents)
	}
	if !got.Stream.OK || got.Stream.Events < 3 || !strings.Contains(got.Stream.Text, "hello over websocket") {
		t.Errorf("streamed chat = %+v", got.Stream)
	}
	if got.Denied.OK || got.Denied.Code != codeUnauthorized || !strings.Contains(got.Denied.Message, "权限") {
		t.Errorf("read key providers.create = %+v, want UNAUTHORIZED in zh", got.Denied)
	}
	ss := got.Session
	if !ss.OK || ss.Content != "echo: node says hi" || ss.Chunks < 3 || ss.History != 2 || ss.Listed != 1 ||
		strings.Join(ss.RunEvents, ",") != "run.started,run.completed" {
		t.Errorf("chat.send session = %+v", ss)
	}
	if !got.Abort.OK || got.Abort.SendOk || got.Abort.Code != codePrecondition {
		t.Errorf("abort = %+v, want the send to fail FAILED_PRECONDITION", got.Abort)
	}
}
