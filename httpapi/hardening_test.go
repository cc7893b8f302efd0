package httpapi

import (
	"strings"
	"testing"
)

// TestBadInputChangesNothing (issue 14): a body that is not valid UTF-8
// is 400 and creates nothing; a repeated single-valued parameter is 400;
// answers that carry a full key are not cacheable.
func TestBadInputChangesNothing(t *testing.T) {
	w := newWorld(t)
	r := w.do(t, request{method: "POST", path: "/api/keys", cookie: w.aliceCk, body: "{\"name\":\"\xff\xfe\"}"})
	mustStatus(t, r, 400, codeInvalidJSON)
	list := w.do(t, request{method: "GET", path: "/api/keys", cookie: w.aliceCk})
	if keys := list.json["keys"].([]any); len(keys) != 0 {
		t.Fatalf("a refused body created %d keys", len(keys))
	}

	id, _ := w.createKey(t, w.aliceCk, "k")
	r = w.do(t, request{method: "GET", path: "/api/keys/" + id.String() + "/usage?days=7&days=8", cookie: w.aliceCk})
	mustStatus(t, r, 400, codeValidation)

	r = w.do(t, request{method: "POST", path: "/api/keys", cookie: w.aliceCk, body: `{"name":"fresh"}`})
	if r.status != 201 || r.headers["Cache-Control"] != "no-store" {
		t.Errorf("create = %d, Cache-Control %q; want 201 and no-store", r.status, r.headers["Cache-Control"])
	}
	r = w.do(t, request{method: "POST", path: "/api/keys/" + id.String() + "/rotate", cookie: w.aliceCk})
	if r.status != 200 || r.headers["Cache-Control"] != "no-store" {
		t.Errorf("rotate = %d, Cache-Control %q; want 200 and no-store", r.status, r.headers["Cache-Control"])
	}
}

// TestProxyDropsHopByHop (issue 14): a client's Connection header never
// reaches the upstream (an intermediary there would drop the headers it
// names: the identity headers gatehouse sets), nor do header names with
// "_" (read as "-" by some servers: a way to smuggle identity headers).
func TestProxyDropsHopByHop(t *testing.T) {
	p := newProxyWorld(t)
	r := p.do(t, request{method: "GET", path: "/api/proxy/echo/v1/x", headers: []string{
		"X-API-Key", p.secret, "Connection", "X-Gatehouse-User-Id, X-Upstream-Token", "X_Gatehouse_User_Id", "evil",
	}})
	if r.status != 202 {
		t.Fatalf("proxied answer = %d %s", r.status, r.body)
	}
	got := p.up.lastRequest().Headers
	for k, v := range got {
		if strings.EqualFold(k, "Connection") && v != "keep-alive" && v != "close" {
			t.Errorf("upstream got Connection: %q", v)
		}
		if strings.Contains(k, "_") {
			t.Errorf("upstream got %s: %q, want headers with _ dropped", k, v)
		}
	}
	if got["X-Gatehouse-User-Id"] != p.alice.ID.String() || got["X-Upstream-Token"] != "s3cret" {
		t.Errorf("identity or credential header missing upstream: %v", got)
	}
}
