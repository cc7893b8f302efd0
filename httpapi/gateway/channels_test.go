package gateway

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"gatehouse/actors/gateway"
	"gatehouse/actors/gateway/app"
	"gatehouse/actors/gateway/webhook"
)

// TestChannelInstances: the CRUD of channel instances, each type's config
// validated with errors naming the field, credentials write-only.
func TestChannelInstances(t *testing.T) {
	e := newGWEnv(t, gwOpts{token: gwToken})
	e.seedAgent("a1", `{"delay_ms":0}`, "")
	reader := e.must(201, "POST", "/v1/api-keys", gwToken, `{"name":"r","scopes":["operator.read"],"user_id":"alice"}`).body["key"].(string)
	for _, tt := range []struct{ body, field string }{
		{`{"name":"t","channel_type":"telegram","agent_id":"a1","credentials":{"secret":"0123456789abcdef"}}`, "channel_type"},
		{`{"name":"w","channel_type":"webhook","agent_id":"a1"}`, "credentials.secret"},
		{`{"name":"w","channel_type":"webhook","agent_id":"a1","credentials":{"secret":"short"}}`, "credentials.secret"},
		{`{"name":"w","channel_type":"webhook","agent_id":"a1","credentials":{"secret":"0123456789abcdef","token":"x"}}`, "credentials.token"},
		{`{"name":"w","channel_type":"webhook","agent_id":"a1","config":{"async":true},"credentials":{"secret":"0123456789abcdef"}}`, "config.callback_url"},
		{`{"name":"w","channel_type":"webhook","agent_id":"a1","config":{"async":true,"callback_url":"http://u:p@x/cb"},"credentials":{"secret":"0123456789abcdef"}}`, "config.callback_url"},
		{`{"name":"w","channel_type":"webhook","agent_id":"a1","config":{"colour":"red"},"credentials":{"secret":"0123456789abcdef"}}`, "colour"},
		{`{"name":"Bad Name","channel_type":"webhook","agent_id":"a1","credentials":{"secret":"0123456789abcdef"}}`, "name"},
		{`{"name":"w","channel_type":"webhook","credentials":{"secret":"0123456789abcdef"}}`, "agent_id"},
	} {
		r := e.do("POST", "/v1/channel-instances", gwToken, tt.body)
		if r.status != 400 || !strings.Contains(r.errMsg(), tt.field) {
			t.Errorf("create %s = %d %s, want 400 naming %s", tt.body, r.status, r.raw, tt.field)
		}
	}
	e.must(404, "POST", "/v1/channel-instances", gwToken, `{"name":"w","channel_type":"webhook","agent_id":"nope","credentials":{"secret":"0123456789abcdef"}}`)
	e.must(403, "POST", "/v1/channel-instances", reader, `{"name":"w","channel_type":"webhook","agent_id":"a1","credentials":{"secret":"0123456789abcdef"}}`)
	r := e.must(201, "POST", "/v1/channel-instances", gwToken, `{"name":"support","channel_type":"webhook","agent_id":"a1","credentials":{"secret":"s3cret-0123456789abcdef"}}`)
	id := r.body["id"].(string)
	if strings.Contains(r.raw, "s3cret") || r.body["credentials"].(map[string]any)["secret"] != "****cdef" || r.body["enabled"] != true {
		t.Errorf("created = %s, want the secret masked", r.raw)
	}
	e.must(409, "POST", "/v1/channel-instances", gwToken, `{"name":"support","channel_type":"webhook","agent_id":"a1","credentials":{"secret":"0123456789abcdef"}}`)
	if r := e.must(200, "GET", "/v1/channel-instances", reader, ""); len(r.body["data"].([]any)) != 1 || strings.Contains(r.raw, "s3cret") {
		t.Errorf("list = %s", r.raw)
	}
	e.must(200, "GET", "/v1/channel-instances/support", reader, "")
	r = e.must(200, "PUT", "/v1/channel-instances/"+id, gwToken, `{"display_name":"Support desk","config":{"async":true,"callback_url":"http://127.0.0.1:9/cb"}}`)
	if r.body["display_name"] != "Support desk" || r.body["credentials"].(map[string]any)["secret"] != "****cdef" || r.body["name"] != "support" {
		t.Errorf("updated = %s, want the credentials kept", r.raw)
	}
	e.must(412, "DELETE", "/v1/agents/a1", gwToken, "", "X-Gateway-User-Id", "alice") // in use by the instance
	e.must(204, "DELETE", "/v1/channel-instances/support", gwToken, "")
	e.must(404, "GET", "/v1/channel-instances/support", gwToken, "")
	acts := e.must(200, "GET", "/v1/activity?entity_type=channel_instance", gwToken, "").body["data"].([]any)
	if len(acts) != 3 {
		t.Errorf("channel activity = %v, want create, update, delete", acts)
	}
}

// TestWebhookChannel drives the webhook channel as a sender would: signed
// messages run the agent for the sender in their own session; bad
// signatures, stale timestamps and replays run nothing; an async
// instance's reply reaches its callback, retried after a failure.
func TestWebhookChannel(t *testing.T) {
	e := newGWEnv(t, gwOpts{token: gwToken})
	e.seedAgent("a1", `{"delay_ms":0}`, "")
	const secret = "s3cret-0123456789abcdef"
	id := e.must(201, "POST", "/v1/channel-instances", gwToken, `{"name":"support","channel_type":"webhook","agent_id":"a1","credentials":{"secret":"`+secret+`"}}`).body["id"].(string)
	send := func(inst string, ts int64, body, sig string) gwResp {
		t.Helper()
		if sig == "" {
			sig = webhook.Sign(secret, ts, []byte(body))
		}
		return e.do("POST", "/v1/channels/"+inst+"/inbound", "", body, webhook.HeaderTimestamp, strconv.FormatInt(ts, 10), webhook.HeaderSignature, sig)
	}
	now := e.gw.Now().Unix() // the gateway's clock
	r := send(id, now, `{"sender_id":"u-42","message":"hello"}`, "")
	if r.status != 200 || r.body["reply"] != "echo: hello" || r.body["session_key"] != "wh:"+id+":u-42" || r.body["run_id"] == "" {
		t.Fatalf("inbound = %d %s", r.status, r.raw)
	}
	if r := send(id, now+1, `{"sender_id":"u-42","message":"again"}`, ""); r.status != 200 || r.body["reply"] != "echo: again" {
		t.Fatalf("second inbound = %d %s", r.status, r.raw)
	}
	if l := e.must(200, "GET", "/v1/sessions?user_id=u-42", gwToken, "").body["data"].([]any); len(l) != 0 {
		t.Errorf("gateway user u-42's sessions = %v, want none: a sender is not that user", l)
	}
	sess := e.must(200, "GET", "/v1/sessions?user_id=channel:"+id+":u-42", gwToken, "").body["data"].([]any)
	if len(sess) != 1 || sess[0].(map[string]any)["message_count"] != 4.0 || sess[0].(map[string]any)["channel"] != "webhook" {
		t.Errorf("sender's sessions = %v, want one with both turns", sess)
	}
	waitTraces(t, e, 2)
	valid := `{"sender_id":"u-42","message":"x"}`
	for _, tt := range []struct {
		name, inst string
		ts         int64
		body, sig  string
		want       int
	}{
		{"bad signature", id, now, valid, "sha256=" + strings.Repeat("0", 64), 401},
		{"signed with another secret", id, now, valid, webhook.Sign("another-secret-0123", now, []byte(valid)), 401},
		{"body changed after signing", id, now, valid, webhook.Sign(secret, now, []byte(`{"sender_id":"u-1","message":"x"}`)), 401},
		{"stale timestamp", id, now - 6*60, valid, "", 401},
		{"future timestamp", id, now + 6*60, valid, "", 401},
		{"replay", id, now, `{"sender_id":"u-42","message":"hello"}`, "", 401},
		{"unknown instance", "nope", now, valid, "", 404},
		{"no sender", id, now + 2, `{"message":"x"}`, "", 400},
	} {
		if r := send(tt.inst, tt.ts, tt.body, tt.sig); r.status != tt.want {
			t.Errorf("%s: %d %s, want %d", tt.name, r.status, r.raw, tt.want)
		}
	}
	if p, _ := e.gw.TracePage(ctxT(t), gateway.TraceFilter{}); p.Total != 2 {
		t.Errorf("%d runs, want only the 2 signed ones", p.Total)
	}
	e.must(200, "PUT", "/v1/channel-instances/"+id, gwToken, `{"enabled":false}`)
	if r := send(id, now+3, `{"sender_id":"u-42","message":"x"}`, ""); r.status != 404 {
		t.Errorf("disabled instance = %d", r.status)
	}

	// Async: 202 at once, the reply POSTed to the callback, signed; the
	// first attempt fails (500) and is retried.
	var calls atomic.Int32
	got := make(chan string, 1)
	cb := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		ts, _ := strconv.ParseInt(r.Header.Get(webhook.HeaderTimestamp), 10, 64)
		if r.Header.Get(webhook.HeaderSignature) != webhook.Sign(secret, ts, b) {
			t.Errorf("callback signature %q does not verify", r.Header.Get(webhook.HeaderSignature))
		}
		if calls.Add(1) == 1 {
			w.WriteHeader(500)
			return
		}
		got <- string(b)
	}))
	defer cb.Close()
	e.must(200, "PUT", "/v1/channel-instances/"+id, gwToken, fmt.Sprintf(`{"enabled":true,"config":{"async":true,"callback_url":%q}}`, cb.URL+"/cb"))
	r = send(id, now+4, `{"sender_id":"u-7","message":"later please"}`, "")
	if r.status != 202 || r.body["accepted"] != true {
		t.Fatalf("async inbound = %d %s", r.status, r.raw)
	}
	select {
	case b := <-got:
		var out map[string]any
		_ = json.Unmarshal([]byte(b), &out)
		if out["reply"] != "echo: later please" || out["sender_id"] != "u-7" || calls.Load() != 2 {
			t.Errorf("callback = %s after %d calls", b, calls.Load())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no callback")
	}
}

// TestWebhookAsyncBounded (issue 31): an async instance holds at most
// webhook_max_in_flight messages, each from its 202 until its callback
// is delivered or abandoned: beyond it a message is 429
// RESOURCE_EXHAUSTED with Retry-After and runs nothing; the accepted ones
// all complete; a callback receiver that is down keeps the slots (its
// retries are the bounded queue) until the retries end.
func TestWebhookAsyncBounded(t *testing.T) {
	const maxInFlight = 3
	e := newGWEnv(t, gwOpts{token: gwToken, app: func(c *app.Config) {
		c.Webhook.MaxInFlight = maxInFlight
		// The wait between a callback's two attempts is the window in
		// which the test sees every slot held by a retry: a second, so
		// that a loaded machine's scheduling does not close it.
		c.Webhook.CallbackRetry, c.Webhook.CallbackAttempts = time.Second, 2
	}})
	e.seedAgent("a1", `{"delay_ms":300}`, "") // a turn takes over half a second: the 8 messages arrive while the first ones run
	const secret = "s3cret-0123456789abcdef"
	var calls atomic.Int32
	var down atomic.Bool
	got := make(chan map[string]any, 100)
	cb := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		calls.Add(1)
		if down.Load() {
			w.WriteHeader(503)
			return
		}
		var out map[string]any
		_ = json.Unmarshal(b, &out)
		got <- out
	}))
	defer cb.Close()
	id := e.must(201, "POST", "/v1/channel-instances", gwToken, fmt.Sprintf(`{"name":"busy","channel_type":"webhook","agent_id":"a1",`+
		`"config":{"async":true,"callback_url":%q},"credentials":{"secret":%q}}`, cb.URL+"/cb", secret)).body["id"].(string)
	var n atomic.Int64
	send := func() gwResp {
		t.Helper()
		i := n.Add(1)
		ts := e.gw.Now().Unix()
		body := fmt.Sprintf(`{"sender_id":"u-%d","message":"m%d"}`, i, i)
		return e.do("POST", "/v1/channels/"+id+"/inbound", "", body, webhook.HeaderTimestamp, strconv.FormatInt(ts, 10), webhook.HeaderSignature, webhook.Sign(secret, ts, []byte(body)))
	}
	wantBusy := func(r gwResp) {
		t.Helper()
		d, _ := r.body["error"].(map[string]any)
		if r.status != 429 || r.errCode() != codeExhausted || r.header.Get("Retry-After") != "5" || d["retryable"] != true || d["retryAfterMs"] != 5000.0 ||
			!strings.Contains(r.errMsg(), "gateway.webhook_max_in_flight") {
			t.Errorf("message beyond the bound = %d Retry-After %q %s, want 429 RESOURCE_EXHAUSTED, Retry-After 5, naming the setting", r.status, r.header.Get("Retry-After"), r.raw)
		}
	}
	accepted := 0
	for range 8 {
		switch r := send(); r.status {
		case 202:
			accepted++
		default:
			wantBusy(r)
		}
	}
	if accepted != maxInFlight {
		t.Fatalf("%d of 8 async messages accepted at once, want %d", accepted, maxInFlight)
	}
	for range accepted {
		select {
		case out := <-got:
			if !strings.HasPrefix(out["reply"].(string), "echo: m") {
				t.Errorf("callback = %v", out)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("an accepted message never called back")
		}
	}
	waitFree := func() {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			r := send()
			if r.status == 202 {
				return
			}
			if wantBusy(r); time.Now().After(deadline) {
				t.Fatal("the slots were never freed")
			}
		}
	}
	waitFree() // the callbacks delivered, the slots are free
	<-got

	// The receiver is down: the messages' retries hold their slots (the
	// retry queue is bounded by the same number) until abandoned. The
	// receiver has the last callback before the gateway has its answer
	// and frees that slot, so each message is sent until accepted.
	down.Store(true)
	before := calls.Load()
	for range maxInFlight {
		waitFree()
	}
	waitCalls := func(n int32, what string) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); calls.Load() < before+n; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%d callback attempts while the receiver was down, want %s", calls.Load()-before, what)
			}
		}
	}
	waitCalls(maxInFlight, "each message's first")
	wantBusy(send()) // every slot waits on a retry
	// Each message is tried twice before its slot is freed: the count is
	// read once they all have been, not when the first slot frees.
	waitCalls(2*maxInFlight, "each message's 2")
	waitFree() // the retries were abandoned
	// Every accepted message ran once; the refused ones ran nothing.
	waitTraces(t, e, accepted+1+maxInFlight+1)
	if p, _ := e.gw.TracePage(ctxT(t), gateway.TraceFilter{}); p.Total != accepted+1+maxInFlight+1 {
		t.Errorf("%d runs, want %d: the refused messages ran nothing", p.Total, accepted+1+maxInFlight+1)
	}
}
