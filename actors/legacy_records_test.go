package actors

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"gatehouse/wal"
)

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
			got, ok, err := decodeAccountEvent(wal.Record{Type: g.rec.Type, Data: legacy})
			if !ok || err != nil {
				t.Fatalf("decodeAccountEvent(legacy) = %v, %v", ok, err)
			}
			want, _, err := decodeAccountEvent(g.rec)
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

// TestGoldenFilesNameTheirType: every golden file is one of goldenRecords
// (or its legacy twin), so a removed record type cannot leave a stale file.
func TestGoldenFilesNameTheirType(t *testing.T) {
	known := map[string]bool{}
	for _, g := range goldenRecords() {
		known[g.name+".golden"] = true
		known["legacy_"+g.name+".golden"] = true
	}
	files, err := filepath.Glob(filepath.Join("testdata", "*.golden"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if name := filepath.Base(f); !known[name] {
			t.Errorf("%s matches no record of goldenRecords", strings.TrimSuffix(name, ".golden"))
		}
	}
}
