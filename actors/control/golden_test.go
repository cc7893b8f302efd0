package control

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/uuid"

	"gatehouse/wal"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// TestGolden pins the on-disk form of every record kind: a change to a
// record's layout fails here (then: a new "v" and a decoder for the old).
// go test ./actors/control -run Golden -update rewrites the files.
func TestGolden(t *testing.T) {
	id := uuid.MustParse("6f1c1d3e-0c55-4a0e-9d7f-0c2b6f0e9a11")
	user := uuid.MustParse("0b5f1d6a-7a3c-4f57-8e8e-2d7c1a9b3c44")
	events := []struct {
		name string
		e    event
	}{
		{"200_saved_token", saved(kindToken, id.String(), tokenRec{ID: id, UserID: user, Name: "ci", Scopes: []Scope{ScopeRead, ScopeWrite},
			Hash: hashOf("svc_pat_" + "0123456789abcdefghijABCDEFGHIJ01"), CreatedAt: 1795600000, ExpiresAt: 1795700000, LastUsed: 1795600060})},
		{"200_saved_token_parent", saved(kindToken, user.String(), tokenRec{ID: user, UserID: user, Name: "minted", Scopes: []Scope{ScopeRead},
			Hash: hashOf("svc_pat_" + "0123456789abcdefghijABCDEFGHIJ02"), CreatedAt: 1795600000, ExpiresAt: 1795700000, Parent: id})},
		{"200_saved_service", saved(kindService, "billing", serviceRec{Name: "billing", Upstream: "http://10.0.0.5:9000/base",
			Headers: map[string][]byte{"X-Upstream-Token": {1, 2, 3, 4}}, TimeoutMs: 2000, MaxConns: 16, Enabled: true,
			Description: "billing API", CreatedAt: 1795600000000000000, UpdatedAt: 1795600000000000001})},
		{"200_saved_key_services", saved(kindKeyServices, id.String(), keyServicesRec{KeyID: id, Services: []string{"billing", "echo"}})},
		{"201_deleted_token", deleted(kindToken, id.String())},
	}
	for _, tt := range events {
		t.Run(tt.name, func(t *testing.T) {
			rec := tt.e.record()
			path := filepath.Join("testdata", tt.name+".json")
			if *update {
				if err := os.MkdirAll("testdata", 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, append(rec.Data, '\n'), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if !bytes.Equal(append(rec.Data, '\n'), want) {
				t.Errorf("record changed:\ngot  %s\nwant %s", rec.Data, want)
			}
			// The stored form still decodes and applies.
			typ := wal.Type(recSaved)
			if tt.e.data == nil {
				typ = recDeleted
			}
			st := newState()
			e, err := decodeEvent(wal.Record{Type: typ, Data: bytes.TrimSpace(want)})
			if err != nil {
				t.Fatal(err)
			}
			if err := st.apply(e); err != nil {
				t.Fatal(err)
			}
		})
	}
}
