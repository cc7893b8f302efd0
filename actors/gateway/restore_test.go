package gateway

import (
	"errors"
	"path/filepath"
	"slices"
	"testing"

	"github.com/google/uuid"

	"gatehouse/actors"
	"gatehouse/actors/actorstest"
)

// testdata/datadir_v1 was written by the build before entity records (its
// records 64..69 and a version-1 section), with the zero master key of
// actorstest: a provider and an agent created, then deleted, after the
// snapshot; keys k1 and k2 before it, k2 revoked and k3 created after it;
// run r1 before it and r2 after it. Its keys' ids were drawn at random, so
// none sits on its id's shard.
var legacyKeys = []struct {
	id      uuid.UUID
	raw     string
	revoked bool
}{
	{uuid.MustParse("2331e752-56bb-454f-b1f8-e1b4889888ab"), "gateway_f3e8c536411304a9396dcd997c12c699", false},
	{uuid.MustParse("6ff25722-9d8d-4d24-8d75-1b4415d3c62e"), "gateway_48ca79db1b3d19272292ec51ef609c01", true},
	{uuid.MustParse("6ed2183d-7733-446f-975a-55970e7470f0"), "gateway_f524c3108c765546b63396451dd2791c", false},
}

func TestRestoreDataDirV1(t *testing.T) {
	dir := t.TempDir()
	actorstest.CopyDir(t, filepath.Join("testdata", "datadir_v1"), dir)
	n := actorstest.New(t, actorstest.WithDir(dir), actorstest.WithExtensions(func() []actors.Extension {
		gw, err := New(DefaultConfig())
		if err != nil {
			t.Fatal(err)
		}
		return []actors.Extension{gw}
	}))
	gw := start(n)
	checkLegacyDir(t, "restored", gw)
	if len(gw.homes.Load().moved) != len(legacyKeys) {
		t.Errorf("moved keys = %d, want %d (every legacy key)", len(gw.homes.Load().moved), len(legacyKeys))
	}
	// A legacy key is revoked through the one shard that holds it.
	if err := gw.RevokeAPIKey(ctx(t), legacyKeys[0].id); err != nil {
		t.Fatalf("RevokeAPIKey(legacy key) = %v", err)
	}
	legacyKeys := slices.Clone(legacyKeys)
	legacyKeys[0].revoked = true
	checkKeys := func(stage string, gw *Gateway) {
		t.Helper()
		for _, k := range legacyKeys {
			_, err := gw.Authenticate(ctx(t), []byte(k.raw))
			if k.revoked != errors.Is(err, ErrKeyInvalid) || !k.revoked && err != nil {
				t.Errorf("%s: Authenticate(key %s) = %v, revoked %v", stage, k.id, err, k.revoked)
			}
		}
	}
	checkKeys("after revoke", gw)
	n.Crash()
	gw = start(n)
	checkKeys("after crash", gw)
	if _, err := n.Sys.Snapshot(); err != nil { // now a v2 section
		t.Fatal(err)
	}
	n.Crash()
	gw = start(n)
	checkKeys("after snapshot v2", gw)
	checkLegacyDir(t, "after snapshot v2", gw)
}

func checkLegacyDir(t *testing.T, stage string, gw *Gateway) {
	t.Helper()
	c := ctx(t)
	ps, err := gw.ListProviders(c)
	if err != nil || len(ps) != 1 || ps[0].Name != "echo" {
		t.Fatalf("%s: providers = %+v, %v; want only echo", stage, ps, err)
	}
	if key, err := gw.ProviderKey(ps[0]); err != nil || key != "sk-legacy-credential" {
		t.Errorf("%s: provider key = %q, %v", stage, key, err)
	}
	as, err := gw.ListAgents(c, "bob")
	if err != nil || len(as) != 1 || as[0].AgentKey != "default" || as[0].Model != "m1b" || as[0].ProviderID != ps[0].ID {
		t.Errorf("%s: bob's agents = %+v, %v; want default (m1b, shared)", stage, as, err)
	}
	if _, err := gw.GetAgent(c, "alice", "temp"); !errors.Is(err, ErrNotFound) {
		t.Errorf("%s: deleted agent temp: %v, want ErrNotFound", stage, err)
	}
	ks, err := gw.ListAPIKeys(c)
	if err != nil || len(ks) != 3 || ks[0].ID != legacyKeys[2].id {
		t.Errorf("%s: api keys = %+v, %v; want 3, newest k3", stage, ks, err)
	}
	us, err := gw.Usage(c, as[0].ID, "")
	if err != nil || len(us) != 2 || us[0].PromptTokens+us[1].PromptTokens != 15 {
		t.Errorf("%s: usage = %+v, %v; want alice 10 and bob 5 prompt tokens", stage, us, err)
	}
	for _, id := range []string{"r1", "r2"} {
		if _, err := gw.Trace(c, id); err != nil {
			t.Errorf("%s: trace %s: %v", stage, id, err)
		}
	}
}
