package pricing

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

// TestDocsTable: docs/pricing.md lists every built-in price as it is,
// every long-context tier in its own table, and the date.
func TestDocsTable(t *testing.T) {
	b, err := os.ReadFile("../../../docs/pricing.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	tiers := 0
	for m, p := range builtin {
		if a := p.Above; a != (Tier{}) {
			tiers++
			row := fmt.Sprintf("| `%s` | %d | %g | %g | %g | %g |", m, a.Tokens, a.Input, a.Output, a.CacheRead, a.CacheWrite)
			if !strings.Contains(doc, row+"\n") {
				t.Errorf("docs/pricing.md lacks the tier row %s", row)
			}
		}
		row := fmt.Sprintf("| `%s` | %g | %g | %g | %g |", m, p.Input, p.Output, p.CacheRead, p.CacheWrite)
		if !strings.Contains(doc, row+"\n") {
			t.Errorf("docs/pricing.md lacks the row %s", row)
		}
	}
	if got, want := strings.Count(doc, "\n| `"), len(builtin)+tiers; got != want {
		t.Errorf("docs/pricing.md has %d model and tier rows, the built-in table %d", got, want)
	}
	if !strings.Contains(doc, "**As of "+BuiltinAsOf+"**") {
		t.Errorf("docs/pricing.md does not say the table is as of %s", BuiltinAsOf)
	}
}
