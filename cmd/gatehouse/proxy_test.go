package main

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// keyOwner is a licensed premium user with one key, on a running child.
type keyOwner struct {
	admin, user *client
	userID      string
	key         createdKey
}

// newKeyOwner creates a user and a key through the API of c.
func newKeyOwner(tb testing.TB, c *child) keyOwner {
	tb.Helper()
	o := keyOwner{admin: newClientLoggedIn(tb, c.api, adminEmail, adminPassword)}
	const password = "proxy-user-password"
	var u struct{ ID string }
	expect(tb, "create user", 201)(o.admin.do("POST", "/api/users", map[string]any{
		"email": "proxy@example.com", "password": password, "plan": "premium", "licenseActive": true,
	}, nil, &u))
	o.userID = u.ID
	o.user = newClientLoggedIn(tb, c.api, "proxy@example.com", password)
	expect(tb, "create key", 201)(o.user.do("POST", "/api/keys", map[string]string{"name": "proxy"}, nil, &o.key))
	return o
}

// startProxyChild starts the binary with the service "llm" pointing at a
// chat stub, which receives its own credentials from the config.
func startProxyChild(tb testing.TB) (*child, *chatStub) {
	tb.Helper()
	stub := newChatStub(tb)
	cfg := writeConfig(tb, tb.TempDir(), map[string]any{"services": map[string]any{"llm": map[string]any{
		"upstream": stub.URL, "timeout": "30s", "headers": map[string]string{"Authorization": "Bearer sk-upstream"},
	}}})
	return startChild(tb, cfg), stub
}

// TestProxyStreamsEndToEnd sends a streamed chat completion through the
// real binary: the first event must reach the client before the upstream
// has finished, then the rest follows.
func TestProxyStreamsEndToEnd(t *testing.T) {
	// Its own data dir and ports: independent of the others, mostly waiting on its process.
	t.Parallel()
	c, stub := startProxyChild(t)
	o := newKeyOwner(t, c)
	req, _ := http.NewRequest("POST", c.api+"/api/proxy/llm/v1/chat/completions",
		strings.NewReader(`{"model":"stub-model","stream":true,"messages":[{"role":"user","content":"count"}]}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+o.key.Key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" || resp.Header.Get("X-RateLimit-Limit") != "10000" {
		t.Fatalf("answer = %d %v", resp.StatusCode, resp.Header)
	}
	sc := bufio.NewScanner(resp.Body)
	first := make(chan string, 1)
	go func() {
		sc.Scan()
		first <- sc.Text()
	}()
	select {
	case line := <-first:
		if !strings.Contains(line, `"content":"one"`) {
			t.Fatalf("first event = %q", line)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("first event did not arrive while the upstream held the rest back")
	}
	select {
	case <-stub.finished:
		t.Fatal("upstream finished before it was released")
	default:
	}
	stub.release()
	var rest []string
	for sc.Scan() {
		if sc.Text() != "" {
			rest = append(rest, sc.Text())
		}
	}
	if len(rest) != 4 || rest[3] != "data: [DONE]" {
		t.Errorf("rest of the stream = %q", rest)
	}
}

// TestProxyEndToEnd checks forwarding, header rewriting, the errors, the
// limit and usage counting of the real binary.
func TestProxyEndToEnd(t *testing.T) {
	// Its own data dir and ports: independent of the others, mostly waiting on its process.
	t.Parallel()
	c, stub := startProxyChild(t)
	o := newKeyOwner(t, c)
	hdr := map[string]string{"X-API-Key": o.key.Key, "X-Forwarded-For": "203.0.113.9"}
	var chat struct {
		Choices []struct{ Message struct{ Content string } }
	}
	expect(t, "completion", 200)(o.user.do("POST", "/api/proxy/llm/v1/chat/completions",
		map[string]any{"model": "m", "messages": []map[string]string{{"role": "user", "content": "hi"}}}, hdr, &chat))
	if len(chat.Choices) != 1 || chat.Choices[0].Message.Content != "echo: hi" {
		t.Errorf("completion = %+v", chat)
	}
	expect(t, "models", 200)(o.user.do("GET", "/api/proxy/llm/v1/models?limit=5", nil, map[string]string{"Authorization": "Bearer " + o.key.Key}, nil))
	for i, h := range stub.headers() {
		if h.Get("Authorization") != "Bearer sk-upstream" || h.Get("X-Api-Key") != "" || h.Get("Cookie") != "" ||
			h.Get("X-Gatehouse-User-Id") != o.userID || h.Get("X-Gatehouse-Key-Id") != o.key.ID ||
			!strings.HasSuffix(h.Get("X-Forwarded-For"), "127.0.0.1") {
			t.Errorf("upstream request %d headers: %v", i, h)
		}
	}

	errs := []struct {
		path, key string
		status    int
		code      string
	}{
		{"/api/proxy/nope/v1/models", o.key.Key, 404, "UNKNOWN_SERVICE"},
		{"/api/proxy/llm/models", o.key.Key, 400, "INVALID_PATH"},
		{"/api/proxy/llm/v1/models", "", 401, "MISSING_API_KEY"},
		{"/api/proxy/llm/v1/models", "svc_live_0123456789abcdef0123456789abcdef", 401, "INVALID_API_KEY"},
	}
	for _, e := range errs {
		var body struct{ Error, Message string }
		expect(t, e.path, e.status)(o.user.do("GET", e.path, nil, map[string]string{"X-API-Key": e.key}, &body))
		if body.Error != e.code || body.Message == "" {
			t.Errorf("%s with key %q = %+v, want %s", e.path, e.key, body, e.code)
		}
	}

	// Two requests were admitted; a limit of 3 admits one more.
	expect(t, "patch limit", 200)(o.admin.do("PATCH", "/api/keys/"+o.key.ID, map[string]any{"rateLimit": 3}, nil, nil))
	expect(t, "third", 200)(o.user.do("GET", "/api/proxy/llm/v1/models", nil, hdr, nil))
	checkLimited(t, c.api+"/api/proxy/llm/v1/models", o.key.Key)

	var use struct{ TotalUsageCount int64 }
	expect(t, "usage", 200)(o.user.do("GET", "/api/keys/"+o.key.ID+"/usage", nil, nil, &use))
	if use.TotalUsageCount != 3 {
		t.Errorf("usage = %d, want 3: every admitted request once, refusals not", use.TotalUsageCount)
	}
}

// checkLimited sends one request over the limit and checks that the 429's
// Retry-After, retryAfter and X-RateLimit-Reset agree to the second.
func checkLimited(tb testing.TB, url, key string) {
	tb.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	req.Header.Set("X-API-Key", key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	now := time.Now().Unix()
	b, _ := io.ReadAll(resp.Body)
	var body struct {
		Error      string
		RetryAfter int64
	}
	_ = json.Unmarshal(b, &body)
	retry, _ := strconv.ParseInt(resp.Header.Get("Retry-After"), 10, 64)
	reset, _ := strconv.ParseInt(resp.Header.Get("X-RateLimit-Reset"), 10, 64)
	if resp.StatusCode != 429 || body.Error != "RATE_LIMIT_EXCEEDED" || body.RetryAfter != retry || retry < 3500 ||
		reset-now < retry-1 || reset-now > retry || resp.Header.Get("X-RateLimit-Remaining") != "0" {
		tb.Errorf("429 = %d %s %v (now %d)", resp.StatusCode, b, resp.Header, now)
	}
}
