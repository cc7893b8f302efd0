package pricing

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

// TestDocsTable: docs/pricing.md lists every built-in price as it is, and
// its date.
func TestDocsTable(t *testing.T) {
	b, err := os.ReadFile("../../../docs/pricing.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	for m, p := range builtin {
		row := fmt.Sprintf("| `%s` | %g | %g | %g | %g |", m, p.Input, p.Output, p.CacheRead, p.CacheWrite)
		if !strings.Contains(doc, row+"\n") {
			t.Errorf("docs/pricing.md lacks the row %s", row)
		}
	}
	if got, want := strings.Count(doc, "\n| `"), len(builtin); got != want {
		t.Errorf("docs/pricing.md has %d model rows, the built-in table %d", got, want)
	}
	if !strings.Contains(doc, "**As of "+BuiltinAsOf+"**") {
		t.Errorf("docs/pricing.md does not say the table is as of %s", BuiltinAsOf)
	}
}
