package keys

import (
	"path/filepath"
	"strings"
	"testing"
)

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
