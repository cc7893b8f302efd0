package waltest

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Golden checks a record's bytes against testdata/name.golden, the form
// on disk that must never change, and returns the file's bytes (for the
// caller's decode check). With update it writes the file first.
func Golden(t *testing.T, name string, data []byte, update bool) (want []byte) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if update {
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if !bytes.Equal(data, want) {
		t.Errorf("record bytes changed:\n got %q\nwant %q", data, want)
	}
	return want
}

// GoldenFilesKnown fails t for every testdata/*.golden file that is not
// one of names (or its "legacy_" twin), so a removed record type cannot
// leave a stale file.
func GoldenFilesKnown(t *testing.T, names []string) {
	t.Helper()
	known := map[string]bool{}
	for _, n := range names {
		known[n+".golden"] = true
		known["legacy_"+n+".golden"] = true
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
