package accounts

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"

	"gatehouse/actors"
	"gatehouse/wal"
	"gatehouse/wal/waltest"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

var allowUnexported = cmp.Exporter(func(reflect.Type) bool { return true })

// goldenRecords is one fixed value of every record type the accounts
// write. The golden files pin their bytes: a diff means the on-disk format
// changed, which needs a new type (or version) and a decoder kept for the
// old one.
func goldenRecords() []struct {
	name string
	rec  wal.Record
} {
	id := uuid.MustParse("6f1c8a52-3c39-4d0e-9a51-1f2a3b4c5d6e")
	var h hash
	h[0], h[31] = 1, 2
	var out []struct {
		name string
		rec  wal.Record
	}
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
	return out
}

func TestGoldenRecords(t *testing.T) {
	for _, g := range goldenRecords() {
		t.Run(g.name, func(t *testing.T) {
			want := waltest.Golden(t, g.name, g.rec.Data, *update)
			// What the golden file holds decodes, and re-encodes to itself.
			ev, err := decodeAccountEvent(wal.Record{Type: g.rec.Type, Data: want})
			if err != nil || !bytes.Equal(ev.record().Data, want) {
				t.Errorf("decode/encode = %v, %q", err, ev.record().Data)
			}
		})
	}
}

// TestGoldenFilesNameTheirType: every golden file is one of goldenRecords
// (or its legacy twin), so a removed record type cannot leave a stale file.
func TestGoldenFilesNameTheirType(t *testing.T) {
	var names []string
	for _, g := range goldenRecords() {
		names = append(names, g.name)
	}
	waltest.GoldenFilesKnown(t, names)
}

// TestLegacyGoldenRecords: testdata/legacy_NNN_*.golden are the user and
// session records the previous build (before records carried "v") wrote for
// the same values as goldenRecords; they are never rewritten. They decode
// to the same events as this build's records and re-encode to this build's
// golden bytes. The other types' golden files were byte-identical to the
// previous build's output for the same values when they were written: their
// layouts did not change.
func TestLegacyGoldenRecords(t *testing.T) {
	n := 0
	for _, g := range goldenRecords() {
		legacy, err := os.ReadFile(filepath.Join("testdata", "legacy_"+g.name+".golden"))
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		n++
		t.Run(g.name, func(t *testing.T) {
			if bytes.Contains(legacy, []byte(`"v"`)) {
				t.Fatalf("legacy record carries a version: %s", legacy)
			}
			got, err := decodeAccountEvent(wal.Record{Type: g.rec.Type, Data: legacy})
			if err != nil {
				t.Fatalf("decodeAccountEvent(legacy) = %v", err)
			}
			want, err := decodeAccountEvent(g.rec)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, got, allowUnexported); diff != "" {
				t.Errorf("legacy record decodes differently (-current +legacy):\n%s", diff)
			}
			if r := got.record(); r.Type != g.rec.Type || !bytes.Equal(r.Data, g.rec.Data) {
				t.Errorf("legacy record re-encodes to %s, want %s", r.Data, g.rec.Data)
			}
		})
	}
	if n != 2 {
		t.Errorf("found %d legacy golden files, want 2 (user put, session put)", n)
	}
}

// TestLegacyAccountRecords: user and session records written before they
// carried a version decode as version 1; a newer version is refused.
func TestLegacyAccountRecords(t *testing.T) {
	legacyUser := `{"id":"6f1c8a52-3c39-4d0e-9a51-1f2a3b4c5d6e","email":"a@example.com","role":"user","plan":"standard","license_active":true,"created_at":1795000000,"password_hash":"x"}`
	ev, err := decodeAccountEvent(wal.Record{Type: recUserPut, Data: []byte(legacyUser)})
	if err != nil {
		t.Fatalf("legacy user = %v", err)
	}
	want := userRecord{V: 1, ID: uuid.MustParse("6f1c8a52-3c39-4d0e-9a51-1f2a3b4c5d6e"), Email: "a@example.com",
		Role: RoleUser, Plan: PlanStandard, LicenseActive: true, CreatedAt: 1795000000, PasswordHash: "x"}
	if diff := cmp.Diff(want, ev.(userSaved).u); diff != "" {
		t.Errorf("legacy user (-want +got):\n%s", diff)
	}
	legacySession := `{"hash":[1,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,2],"user_id":"6f1c8a52-3c39-4d0e-9a51-1f2a3b4c5d6e","expires_at":5}`
	if _, err := decodeAccountEvent(wal.Record{Type: recSessionPut, Data: []byte(legacySession)}); err != nil {
		t.Errorf("legacy session = %v", err)
	}
	newer := `{"v":2,"id":"6f1c8a52-3c39-4d0e-9a51-1f2a3b4c5d6e"}`
	if _, err := decodeAccountEvent(wal.Record{Type: recUserPut, Data: []byte(newer)}); !errors.Is(err, actors.ErrCorrupt) {
		t.Errorf("user record v2 = %v, want ErrCorrupt", err)
	}
}

// TestRecordNames: gatehouse repair names every accounts record type (and
// no other).
func TestRecordNames(t *testing.T) {
	for _, g := range goldenRecords() {
		if name, _, ok := DescribeRecord(g.rec.Type, g.rec.Data); !ok || name == "" {
			t.Errorf("DescribeRecord(%d) = %q, %v", g.rec.Type, name, ok)
		}
		if got := actors.DescribeRecord(g.rec.Type, g.rec.Data, DescribeRecord); strings.HasPrefix(got, "type ") {
			t.Errorf("DescribeRecord(%d) = %q: unnamed", g.rec.Type, got)
		}
	}
	if _, _, ok := DescribeRecord(10, nil); ok {
		t.Error("DescribeRecord claims a key record")
	}
}
