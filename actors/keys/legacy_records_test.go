package keys

import (
	"gatehouse/wal/waltest"
	"testing"
)

// TestGoldenFilesNameTheirType: every golden file is one of goldenRecords
// (or its legacy twin), so a removed record type cannot leave a stale file.
func TestGoldenFilesNameTheirType(t *testing.T) {
	var names []string
	for _, g := range goldenRecords() {
		names = append(names, g.name)
	}
	waltest.GoldenFilesKnown(t, names)
}
