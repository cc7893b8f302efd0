package actors

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"

	"gatehouse/wal"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

// goldenRecords is one fixed value of every record type the keys and
// accounts domains write. The golden files pin their bytes: a diff means
// the on-disk format changed, which needs a new type (or version) and a
// decoder kept for the old one.
func goldenRecords() []struct {
	name string
	rec  wal.Record
} {
	id := uuid.MustParse("6f1c8a52-3c39-4d0e-9a51-1f2a3b4c5d6e")
	var h hash
	h[0], h[31] = 1, 2
	out := []struct {
		name string
		rec  wal.Record
	}{{"001_barrier", wal.Record{Type: recBarrier}}}
	add := func(name string, r wal.Record) {
		out = append(out, struct {
			name string
			rec  wal.Record
		}{fmt.Sprintf("%03d_%s", r.Type, name), r})
	}
	add("user_put", userSaved{u: userRecord{ID: id, Email: "a@example.com", Role: RoleAdmin, Plan: PlanPremium,
		LicenseActive: true, CreatedAt: 1795000000, PasswordHash: "$argon2id$v=19$m=19456,t=2,p=1$c2FsdA$aGFzaA"}}.record())
	add("session_put", sessionOpened{s: sessionRecord{Hash: h, UserID: id, ExpiresAt: 1795604800}}.record())
	add("session_del", sessionClosed{hash: h}.record())
	for _, ev := range sampleEvents() {
		add(map[wal.Type]string{
			recKeyCreated: "key_created", recKeyRotated: "key_rotated", recKeyRevoked: "key_revoked",
			recKeyDeleted: "key_deleted", recKeyUpdated: "key_updated", recKeyUsed: "key_used",
		}[ev.record().Type], ev.record())
	}
	var batch keysUsed
	for _, ev := range sampleEvents() {
		if u, ok := ev.(keyUsed); ok {
			batch = append(batch, u, keyUsed{id: uuid.MustParse("7f1c8a52-3c39-4d0e-9a51-1f2a3b4c5d6e"), pairs: []secCount{{sec: 1795000000, n: 3}}})
		}
	}
	add("keys_used", batch.record())
	return out
}

func TestGoldenRecords(t *testing.T) {
	for _, g := range goldenRecords() {
		t.Run(g.name, func(t *testing.T) {
			path := filepath.Join("testdata", g.name+".golden")
			if *update {
				if err := os.WriteFile(path, g.rec.Data, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if !bytes.Equal(g.rec.Data, want) {
				t.Errorf("record bytes changed:\n got %q\nwant %q", g.rec.Data, want)
			}
			// What the golden file holds decodes, and re-encodes to itself.
			r := wal.Record{Type: g.rec.Type, Data: want}
			if ev, ok, err := decodeAccountEvent(r); ok {
				if err != nil || !bytes.Equal(ev.record().Data, want) {
					t.Errorf("decode/encode = %v, %q", err, ev.record().Data)
				}
			}
			if r.Type == recKeysUsed {
				batch, err := decodeKeysUsed(want)
				if err != nil || len(batch) != 2 || !bytes.Equal(batch.record().Data, want) {
					t.Errorf("decode/encode = %v, %d keys", err, len(batch))
				}
			}
			if ev, ok, err := decodeKeyEvent(r); ok {
				if err != nil || !bytes.Equal(ev.record().Data, want) {
					t.Errorf("decode/encode = %v, %q", err, ev.record().Data)
				}
			}
		})
	}
}

// TestLegacyAccountRecords: user and session records written before they
// carried a version decode as version 1; a newer version is refused.
func TestLegacyAccountRecords(t *testing.T) {
	legacyUser := `{"id":"6f1c8a52-3c39-4d0e-9a51-1f2a3b4c5d6e","email":"a@example.com","role":"user","plan":"standard","license_active":true,"created_at":1795000000,"password_hash":"x"}`
	ev, ok, err := decodeAccountEvent(wal.Record{Type: recUserPut, Data: []byte(legacyUser)})
	if !ok || err != nil {
		t.Fatalf("legacy user = %v, %v", ok, err)
	}
	want := userRecord{V: 1, ID: uuid.MustParse("6f1c8a52-3c39-4d0e-9a51-1f2a3b4c5d6e"), Email: "a@example.com",
		Role: RoleUser, Plan: PlanStandard, LicenseActive: true, CreatedAt: 1795000000, PasswordHash: "x"}
	if diff := cmp.Diff(want, ev.(userSaved).u); diff != "" {
		t.Errorf("legacy user (-want +got):\n%s", diff)
	}
	legacySession := `{"hash":[1,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,2],"user_id":"6f1c8a52-3c39-4d0e-9a51-1f2a3b4c5d6e","expires_at":5}`
	if _, ok, err := decodeAccountEvent(wal.Record{Type: recSessionPut, Data: []byte(legacySession)}); !ok || err != nil {
		t.Errorf("legacy session = %v, %v", ok, err)
	}
	newer := `{"v":2,"id":"6f1c8a52-3c39-4d0e-9a51-1f2a3b4c5d6e"}`
	if _, _, err := decodeAccountEvent(wal.Record{Type: recUserPut, Data: []byte(newer)}); !errors.Is(err, ErrCorrupt) {
		t.Errorf("user record v2 = %v, want ErrCorrupt", err)
	}
}
