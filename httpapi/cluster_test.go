package httpapi

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/valyala/fasthttp"

	"gatehouse/actors/cluster"
	"gatehouse/actors/keys"
)

// fakeCluster is a ClusterView whose membership the test sets: the shard
// function is the real one, over cluster.DefaultShards.
type fakeCluster struct {
	id      string
	live    atomic.Bool
	mu      sync.Mutex
	members []cluster.Member
	owners  []cluster.ShardOwner // by shard
}

func newFakeCluster(id string) *fakeCluster {
	f := &fakeCluster{id: id, owners: make([]cluster.ShardOwner, cluster.DefaultShards)}
	for s := range f.owners {
		f.owners[s] = cluster.ShardOwner{Shard: s}
	}
	return f
}

func (f *fakeCluster) ID() string { return f.id }
func (f *fakeCluster) Live() bool { return f.live.Load() }

func (f *fakeCluster) Members() []cluster.Member {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]cluster.Member(nil), f.members...)
}

func (f *fakeCluster) Owners() []cluster.ShardOwner {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]cluster.ShardOwner(nil), f.owners...)
}

func (f *fakeCluster) ShardOf(id string) int { return cluster.ShardOf(id, len(f.owners)) }

func (f *fakeCluster) Owner(shard int) (node, addr string, epoch int64, ok bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	o := f.owners[shard]
	if o.Owner == "" {
		return "", "", 0, false
	}
	for _, m := range f.members {
		if m.ID == o.Owner {
			addr = m.Addr
		}
	}
	return o.Owner, addr, o.Epoch, true
}

func (f *fakeCluster) set(members []cluster.Member, owner func(shard int) (string, int64)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.members = members
	for s := range f.owners {
		n, e := owner(s)
		f.owners[s] = cluster.ShardOwner{Shard: s, Owner: n, Epoch: e}
	}
}

// TestClusterRoutesAuth: both cluster routes are for admins only, by
// session or by a token with the admin scope, on a node in cluster mode
// and on a single node alike (credentials are checked first).
func TestClusterRoutesAuth(t *testing.T) {
	fc := newFakeCluster("node-a")
	fc.live.Store(true)
	fc.set([]cluster.Member{{ID: "node-a", Addr: "127.0.0.1:7001"}}, func(int) (string, int64) { return "node-a", 5 })
	on := newTestEnv(t, viaTCP(), withOpsTokens(), withServerOptions(WithCluster(fc)))
	off := newTestEnv(t, viaTCP(), withOpsTokens())
	key := "/api/cluster/keys/" + "0b5b5c4e-2a8f-4f7e-9a51-3c3b1f0e7d11"
	tests := []struct {
		name    string
		cookie  func(*testEnv) string
		headers func(*testEnv) []string
		on, off int
		code    string // of the on answer ("" when 200)
		offCode string
	}{
		{"anonymous", nil, nil, 401, 401, codeUnauthorized, codeUnauthorized},
		{"user session", func(w *testEnv) string { return w.aliceCk }, nil, 403, 403, codeForbidden, codeForbidden},
		{"user token", nil, func(w *testEnv) []string { return bearer(w.aliceTok) }, 403, 403, codeInsufficientScope, codeInsufficientScope},
		{"admin token without the admin scope", nil, func(w *testEnv) []string { return bearer(w.adminReadTok) }, 403, 403, codeInsufficientScope, codeInsufficientScope},
		{"bad token", nil, func(*testEnv) []string { return bearer("svc_pat_nope") }, 401, 401, codeInvalidToken, codeInvalidToken},
		{"admin session", func(w *testEnv) string { return w.adminCk }, nil, 200, 404, "", codeNotFound},
		{"admin token", nil, func(w *testEnv) []string { return bearer(w.adminTok) }, 200, 404, "", codeNotFound},
	}
	for _, path := range []string{"/api/cluster", key} {
		for _, tt := range tests {
			t.Run(tt.name+" "+path, func(t *testing.T) {
				for _, side := range []struct {
					w      *testEnv
					status int
					code   string
				}{{on, tt.on, tt.code}, {off, tt.off, tt.offCode}} {
					req := request{method: "GET", path: path}
					if tt.cookie != nil {
						req.cookie = tt.cookie(side.w)
					}
					if tt.headers != nil {
						req.headers = tt.headers(side.w)
					}
					r := side.w.do(t, req)
					mustStatus(t, r, side.status, side.code)
					if side.code == codeNotFound && !strings.HasPrefix(r.json["message"].(string), "cluster mode is off") {
						t.Errorf("single node: message %q", r.json["message"])
					}
				}
			})
		}
	}
	// Another method is 405, as on every route.
	mustStatus(t, on.do(t, request{method: "POST", path: "/api/cluster", headers: bearer(on.adminTok)}), 405, codeMethodNotAllowed)
}

// TestClusterView: GET /api/cluster lists etcd's members as alive, this
// node always (alive only while its lease is valid), and every shard's
// owner.
func TestClusterView(t *testing.T) {
	fc := newFakeCluster("node-b")
	w := newTestEnv(t, viaTCP(), withOpsTokens(), withServerOptions(WithCluster(fc)))
	owner := func(s int) (string, int64) {
		switch s % 3 {
		case 0:
			return "node-a", int64(100 + s)
		case 1:
			return "node-b", int64(200 + s)
		}
		return "", 0 // unowned, mid-move
	}
	get := func() map[string]any {
		t.Helper()
		r := w.do(t, request{method: "GET", path: "/api/cluster", headers: bearer(w.adminTok)})
		mustStatus(t, r, 200, "")
		return r.json
	}
	member := func(id, addr string, alive bool) map[string]any {
		return map[string]any{"id": id, "addr": addr, "alive": alive}
	}

	fc.live.Store(true)
	fc.set([]cluster.Member{{ID: "node-a", Addr: "10.0.0.1:7000"}, {ID: "node-b", Addr: "10.0.0.2:7000"}, {ID: "node-c", Addr: "10.0.0.3:7000"}}, owner)
	got := get()
	if got["node"] != "node-b" {
		t.Errorf("node = %v", got["node"])
	}
	want := []any{member("node-a", "10.0.0.1:7000", true), member("node-b", "10.0.0.2:7000", true), member("node-c", "10.0.0.3:7000", true)}
	if diff := cmp.Diff(want, got["members"]); diff != "" {
		t.Errorf("members (-want +got):\n%s", diff)
	}
	shards, _ := got["shards"].([]any)
	if len(shards) != cluster.DefaultShards {
		t.Fatalf("%d shards, want %d", len(shards), cluster.DefaultShards)
	}
	for s, v := range shards {
		n, e := owner(s)
		if diff := cmp.Diff(map[string]any{"shard": float64(s), "owner": n, "epoch": float64(e)}, v); diff != "" {
			t.Fatalf("shard %d (-want +got):\n%s", s, diff)
		}
	}

	// The lease lapsed but etcd still lists the node: it says it is not
	// alive.
	fc.live.Store(false)
	want[1] = member("node-b", "10.0.0.2:7000", false)
	if diff := cmp.Diff(want, get()["members"]); diff != "" {
		t.Errorf("lapsed lease: members (-want +got):\n%s", diff)
	}
	// The lease is gone and so is its member key: the node is still
	// listed, in order, without the address etcd held.
	fc.set([]cluster.Member{{ID: "node-a", Addr: "10.0.0.1:7000"}, {ID: "node-c", Addr: "10.0.0.3:7000"}},
		func(int) (string, int64) { return "node-a", 900 })
	got = get()
	want = []any{member("node-a", "10.0.0.1:7000", true), member("node-b", "", false), member("node-c", "10.0.0.3:7000", true)}
	if diff := cmp.Diff(want, got["members"]); diff != "" {
		t.Errorf("lost lease: members (-want +got):\n%s", diff)
	}
	if s := got["shards"].([]any)[7].(map[string]any); s["owner"] != "node-a" || s["epoch"] != 900.0 {
		t.Errorf("shard 7 after the move = %v", s)
	}
}

// TestClusterKey: GET /api/cluster/keys/{id} answers the shard of any
// well-formed id (the key need not exist) and its owner; a malformed id
// is 400 VALIDATION_ERROR.
func TestClusterKey(t *testing.T) {
	fc := newFakeCluster("node-a")
	fc.live.Store(true)
	fc.set([]cluster.Member{{ID: "node-a", Addr: "a:1"}, {ID: "node-b", Addr: "b:1"}}, func(s int) (string, int64) {
		if s%2 == 0 {
			return "node-a", int64(s + 1)
		}
		return "node-b", int64(s + 1)
	})
	w := newTestEnv(t, viaTCP(), withOpsTokens(), withServerOptions(WithCluster(fc)))
	keyID, _ := w.createKey(t, w.aliceCk, "routed")
	tests := []struct {
		name, id string
		status   int
		code     string
		wantID   string
	}{
		{"existing key", keyID.String(), 200, "", keyID.String()},
		{"unknown key", "6f1d1d2e-8c1b-4a49-b2a4-0d6b6f3a9c01", 200, "", "6f1d1d2e-8c1b-4a49-b2a4-0d6b6f3a9c01"},
		{"upper case is the same key", "6F1D1D2E-8C1B-4A49-B2A4-0D6B6F3A9C01", 200, "", "6f1d1d2e-8c1b-4a49-b2a4-0d6b6f3a9c01"},
		{"not a uuid", "not-a-key", 400, codeValidation, ""},
		{"a secret is not an id", "svc_live_abcdefghijklmnopqrstuvwxyz0123456", 400, codeValidation, ""},
		{"braced uuid", "{6f1d1d2e-8c1b-4a49-b2a4-0d6b6f3a9c01}", 400, codeValidation, ""},
		{"uuid without dashes", "6f1d1d2e8c1b4a49b2a40d6b6f3a9c01", 400, codeValidation, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := w.do(t, request{method: "GET", path: "/api/cluster/keys/" + tt.id, headers: bearer(w.adminTok)})
			mustStatus(t, r, tt.status, tt.code)
			if tt.status != 200 {
				if msg, _ := r.json["message"].(string); !strings.HasPrefix(msg, "id ") {
					t.Errorf("message %q does not name the field", msg)
				}
				return
			}
			shard := cluster.ShardOf(tt.wantID, cluster.DefaultShards)
			owner := "node-a"
			if shard%2 == 1 {
				owner = "node-b"
			}
			want := map[string]any{"keyId": tt.wantID, "shard": float64(shard), "owner": owner, "epoch": float64(shard + 1)}
			if diff := cmp.Diff(want, r.json); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
	// An unowned shard (between an owner's death and its successor's
	// claim) has owner "" and epoch 0.
	fc.set(fc.Members(), func(int) (string, int64) { return "", 0 })
	r := w.do(t, request{method: "GET", path: "/api/cluster/keys/" + keyID.String(), cookie: w.adminCk})
	mustStatus(t, r, 200, "")
	if r.json["owner"] != "" || r.json["epoch"] != 0.0 {
		t.Errorf("unowned shard: %v", r.json)
	}
}

// TestClusterHealth: in cluster mode /health (GET and HEAD, on the API
// listener and on the health server) is 200 with cluster.member true
// while the node holds its lease and 503 with member false when it does
// not, flipping back and forth with Live(); a failed WAL is 503 whatever
// the membership. A single node's answer is unchanged.
func TestClusterHealth(t *testing.T) {
	fc := newFakeCluster("node-c")
	w := newTestEnv(t, viaTCP(), withOpsTokens(), withServerOptions(WithCluster(fc)),
		withHealthServer("metrics", false, WithCluster(fc)))
	health := w.health
	single := newTestEnv(t, viaTCP(), withOpsTokens())

	check := func(t *testing.T, e *testEnv, status int, want map[string]any) {
		t.Helper()
		r := e.do(t, request{method: "GET", path: "/health"})
		if r.status != status {
			t.Errorf("GET /health = %d %s, want %d", r.status, r.body, status)
		}
		if diff := cmp.Diff(want, r.json); diff != "" {
			t.Errorf("GET /health (-want +got):\n%s", diff)
		}
		req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
		defer fasthttp.ReleaseRequest(req)
		defer fasthttp.ReleaseResponse(resp)
		req.Header.SetMethod("HEAD")
		req.SetRequestURI("http://" + testHost + "/health")
		if err := e.client.Do(req, resp); err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode() != status || len(resp.Body()) != 0 || resp.Header.ContentLength() != len(r.body) {
			t.Errorf("HEAD /health = %d, body %d bytes, length %d; GET = %d, %d bytes",
				resp.StatusCode(), len(resp.Body()), resp.Header.ContentLength(), r.status, len(r.body))
		}
	}
	ok := map[string]any{"status": "ok", "cluster": map[string]any{"node": "node-c", "member": true}}
	down := map[string]any{"status": "unavailable", "reason": notMember, "cluster": map[string]any{"node": "node-c", "member": false}}
	for i, live := range []bool{false, true, false, true} {
		fc.live.Store(live)
		status, want := 503, down
		if live {
			status, want = 200, ok
		}
		for _, e := range []struct {
			name string
			e    *testEnv
		}{{"api", w}, {"health server", health}} {
			t.Run(e.name, func(t *testing.T) { check(t, e.e, status, want) })
		}
		t.Logf("step %d live=%v checked", i, live)
	}
	t.Run("single node", func(t *testing.T) { check(t, single, 200, map[string]any{"status": "ok"}) })

	// A failed WAL answers as before, with the membership alongside.
	w.sys.node.Log.SetFaultHook(func() error { return syscall.EIO })
	if _, _, err := w.sys.CreateKey(context.Background(), keys.NewKey{Owner: w.sys.KeyOwner(w.alice), Name: "lost"}); err == nil {
		t.Fatal("CreateKey succeeded on a failing disk")
	}
	w.sys.node.Log.SetFaultHook(nil)
	check(t, w, 503, map[string]any{"status": "unavailable", "reason": "write-ahead log failed: restart to recover",
		"cluster": map[string]any{"node": "node-c", "member": true}})
}
