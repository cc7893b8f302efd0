package gateway

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"

	"gatehouse/actors"
	"gatehouse/actors/actorstest"
)

func TestMain(m *testing.M) { actorstest.VerifyTestMain(m) }

// newNode returns a node whose every Start builds a Gateway from cfg;
// setup (nil: none) may then replace its sources of ids and keys.
func newNode(tb testing.TB, cfg Config, setup func(*Gateway)) *actorstest.Node {
	tb.Helper()
	return actorstest.New(tb, actorstest.WithExtensions(func() []actors.Extension {
		gw, err := New(cfg)
		if err != nil {
			tb.Fatalf("New: %v", err)
		}
		if setup != nil {
			setup(gw)
		}
		return []actors.Extension{gw}
	}))
}

// start starts n and returns its gateway.
func start(n *actorstest.Node) *Gateway {
	n.Start()
	return n.Exts[0].(*Gateway)
}

func ctx(tb testing.TB) context.Context {
	tb.Helper()
	return actorstest.Ctx(tb)
}

func ptr[T any](v T) *T { return &v }

func TestAPIKeys(t *testing.T) {
	n := newNode(t, DefaultConfig(), nil)
	gw := start(n)
	k, raw, err := gw.CreateAPIKey(ctx(t), NewAPIKey{Name: "ci", Scopes: []Scope{ScopeRead}, ExpiresIn: time.Hour, UserID: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	if !WellFormed([]byte(raw)) {
		t.Fatalf("raw key %q is not gateway_ + 32 hex", raw)
	}
	// The id maps to the shard of the hash: revocation asks that shard only.
	if h, home := shardOf(k.Hash, len(gw.shards)), shardOfID(k.ID, len(gw.shards)); h != home || len(gw.homes.Load().moved) != 0 {
		t.Errorf("key %s: hash shard %d, id shard %d, %d moved keys; want one shard, none moved", k.ID, h, home, len(gw.homes.Load().moved))
	}
	got, err := gw.Authenticate(ctx(t), []byte(raw))
	if err != nil || got.ID != k.ID || !cmp.Equal(got.Scopes, []Scope{ScopeRead}) || got.UserID != "alice" || k.UserID != "alice" {
		t.Fatalf("Authenticate = %+v, %v; want the key, its scopes and its user alice", got, err)
	}
	// A read or write key acts for one user: creating one without is refused.
	for _, n := range []NewAPIKey{
		{Name: "x", Scopes: []Scope{ScopeWrite}},
		{Name: "x", Scopes: []Scope{ScopeRead}, UserID: "bad\nuser"},
	} {
		if _, _, err := gw.CreateAPIKey(ctx(t), n); !errors.Is(err, ErrInvalid) {
			t.Errorf("CreateAPIKey(%+v) = %v, want ErrInvalid", n, err)
		}
	}
	tests := []struct {
		name string
		tok  string
		want error
	}{
		{"empty", "", ErrKeyMissing},
		{"malformed", "gateway_XYZ", ErrKeyInvalid},
		{"unknown", KeyPrefix + "00000000000000000000000000000000", ErrKeyInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := gw.Authenticate(ctx(t), []byte(tt.tok)); !errors.Is(err, tt.want) {
				t.Errorf("Authenticate(%q) = %v, want %v", tt.tok, err, tt.want)
			}
		})
	}
	n.Clock.Advance(2 * time.Hour)
	if _, err := gw.Authenticate(ctx(t), []byte(raw)); !errors.Is(err, ErrKeyInvalid) {
		t.Errorf("expired key: Authenticate = %v, want ErrKeyInvalid", err)
	}
	k2, raw2, _ := gw.CreateAPIKey(ctx(t), NewAPIKey{Name: "two", Scopes: []Scope{ScopeAdmin}})
	if err := gw.RevokeAPIKey(ctx(t), k2.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := gw.Authenticate(ctx(t), []byte(raw2)); !errors.Is(err, ErrKeyInvalid) {
		t.Errorf("revoked key: Authenticate = %v, want ErrKeyInvalid", err)
	}
	if err := gw.RevokeAPIKey(ctx(t), uuid.New()); !errors.Is(err, ErrNotFound) {
		t.Errorf("RevokeAPIKey(unknown) = %v, want ErrNotFound", err)
	}
	if _, _, err := gw.CreateAPIKey(ctx(t), NewAPIKey{Name: "x", Scopes: []Scope{"operator.god"}}); !errors.Is(err, ErrInvalid) {
		t.Errorf("bad scope = %v, want ErrInvalid", err)
	}
}

func TestScopeGrants(t *testing.T) {
	tests := []struct {
		have, need Scope
		want       bool
	}{
		{ScopeAdmin, ScopeRead, true}, {ScopeAdmin, ScopeAdmin, true}, {ScopeWrite, ScopeRead, true},
		{ScopeWrite, ScopeAdmin, false}, {ScopeRead, ScopeWrite, false}, {"x", ScopeRead, false},
	}
	for _, tt := range tests {
		if got := tt.have.Grants(tt.need); got != tt.want {
			t.Errorf("%s.Grants(%s) = %v, want %v", tt.have, tt.need, got, tt.want)
		}
	}
}

func TestProvidersAndAgents(t *testing.T) {
	n := newNode(t, DefaultConfig(), nil)
	gw := start(n)
	p, err := gw.CreateProvider(ctx(t), ProviderInput{Name: "oa", ProviderType: ProviderOpenAICompat, APIBase: "http://127.0.0.1:1/v1/", APIKey: ptr("sk-secret-123456"), Enabled: true})
	if err != nil {
		t.Fatal(err)
	}
	if p.APIKeyHint != "****3456" || p.APIBase != "http://127.0.0.1:1/v1" {
		t.Errorf("provider = %+v", p)
	}
	if key, err := gw.ProviderKey(p); err != nil || key != "sk-secret-123456" {
		t.Errorf("ProviderKey = %q, %v", key, err)
	}
	if _, err := gw.CreateProvider(ctx(t), ProviderInput{Name: "oa", ProviderType: ProviderEcho}); !errors.Is(err, ErrExists) {
		t.Errorf("duplicate provider = %v, want ErrExists", err)
	}
	a, err := gw.CreateAgent(ctx(t), "alice", AgentInput{AgentKey: ptr("helper"), Provider: ptr("oa"), Model: ptr("gpt")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := gw.CreateAgent(ctx(t), "bob", AgentInput{AgentKey: ptr("helper"), Provider: ptr("oa"), Model: ptr("gpt")}); !errors.Is(err, ErrExists) {
		t.Errorf("duplicate agent_key = %v, want ErrExists", err)
	}
	if _, err := gw.GetAgent(ctx(t), "bob", "helper"); !errors.Is(err, ErrNotFound) {
		t.Errorf("bob GetAgent = %v, want ErrNotFound", err)
	}
	if _, err := gw.UpdateAgent(ctx(t), "alice", a.ID.String(), AgentInput{SharedWith: &[]string{"bob"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := gw.UpdateAgent(ctx(t), "bob", "helper", AgentInput{Model: ptr("x")}); !errors.Is(err, ErrForbidden) {
		t.Errorf("bob UpdateAgent = %v, want ErrForbidden", err)
	}
	if as, _ := gw.ListAgents(ctx(t), "bob"); len(as) != 1 {
		t.Errorf("bob ListAgents = %d agents, want 1", len(as))
	}
	if err := gw.DeleteProvider(ctx(t), "oa"); !errors.Is(err, ErrInUse) {
		t.Errorf("DeleteProvider in use = %v, want ErrInUse", err)
	}
	if err := gw.DeleteAgent(ctx(t), "bob", "helper"); !errors.Is(err, ErrForbidden) {
		t.Errorf("bob DeleteAgent = %v, want ErrForbidden", err)
	}
}

// TestRestart: providers, agents, API keys and usage survive a crash, both
// from the WAL alone and from a snapshot plus the WAL after it.
func TestRestart(t *testing.T) {
	n := newNode(t, DefaultConfig(), nil)
	gw := start(n)
	p, err := gw.CreateProvider(ctx(t), ProviderInput{Name: "echo", ProviderType: ProviderEcho, APIKey: ptr("sk-never-in-clear"),
		APIKeys: &[]string{"sk-pool-never-in-clear-1", "sk-pool-never-in-clear-2"}, Enabled: true})
	if err != nil {
		t.Fatal(err)
	}
	a, err := gw.CreateAgent(ctx(t), "alice", AgentInput{AgentKey: ptr("default"), Provider: ptr("echo"), Model: ptr("m")})
	if err != nil {
		t.Fatal(err)
	}
	_, raw, err := gw.CreateAPIKey(ctx(t), NewAPIKey{Name: "k", Scopes: []Scope{ScopeWrite}, UserID: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	run := func(id string, prompt int64) {
		gw.RecordRun(Trace{ID: id, AgentID: a.ID, UserID: "alice", Status: RunOK, StartedAt: n.Clock.Now(),
			Spans: []Span{{Name: "llm", Kind: "llm", PromptTokens: prompt, CompletionTokens: 1, Status: RunOK}}})
	}
	waitUsage := func(gw *Gateway, want int64) {
		t.Helper()
		if err := gw.syncRuns(ctx(t)); err != nil {
			t.Fatal(err)
		}
		us, err := gw.Usage(ctx(t), a.ID, "alice")
		if err != nil || len(us) != 1 || us[0].PromptTokens != want {
			t.Fatalf("usage = %+v, %v, want prompt tokens %d", us, err, want)
		}
	}
	run("r1", 10)
	waitUsage(gw, 10)

	check := func(stage string, gw *Gateway, wantPrompt int64) {
		t.Helper()
		if got, err := gw.GetProvider(ctx(t), p.ID.String()); err != nil || got.APIKeyHint != "****lear" {
			t.Errorf("%s: provider = %+v, %v", stage, got, err)
		} else if key, _ := gw.ProviderKey(got); key != "sk-never-in-clear" {
			t.Errorf("%s: provider key = %q", stage, key)
		} else if keys, err := gw.ProviderKeys(got); err != nil || len(keys) != 3 || keys[2] != "sk-pool-never-in-clear-2" {
			t.Errorf("%s: provider keys = %d keys, %v; want api_key and the pool of 2", stage, len(keys), err)
		}
		if _, err := gw.GetAgent(ctx(t), "alice", "default"); err != nil {
			t.Errorf("%s: agent: %v", stage, err)
		}
		if _, err := gw.Authenticate(ctx(t), []byte(raw)); err != nil {
			t.Errorf("%s: api key: %v", stage, err)
		}
		waitUsage(gw, wantPrompt)
		if tr, err := gw.Trace(ctx(t), "r1"); err != nil || tr.AgentID != a.ID {
			t.Errorf("%s: trace r1 = %+v, %v", stage, tr, err)
		}
	}
	n.Crash()
	gw = start(n)
	check("after crash (wal only)", gw, 10)

	if _, err := n.Sys.Snapshot(); err != nil {
		t.Fatal(err)
	}
	run("r2", 5) // after the snapshot: replayed exactly once
	waitUsage(gw, 15)
	n.Crash()
	gw = start(n)
	check("after crash (snapshot + wal)", gw, 15)
	n.Stop()
	gw = start(n)
	check("after clean stop", gw, 15)
	n.Stop()
	// The credential is sealed: it appears in no file of the data dir.
	err = filepath.WalkDir(n.Dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		for _, secret := range []string{"sk-never-in-clear", "sk-pool-never-in-clear-1", "sk-pool-never-in-clear-2"} {
			if err == nil && bytes.Contains(b, []byte(secret)) {
				t.Errorf("%s holds the provider credential %s in clear", path, secret[:7])
			}
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}
