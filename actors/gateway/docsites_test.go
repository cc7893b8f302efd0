package gateway

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestAddingAResourceSites keeps docs/adding-a-resource.md true: every
// file it names exists, and every Go name it shows in code (a function,
// type, method, field or test) is still a word of the packages the guide
// walks through. A rename or a move that leaves the guide behind fails
// here, so the guide is mended in the same change (issue 33).
func TestAddingAResourceSites(t *testing.T) {
	const root = "../.."
	doc, err := os.ReadFile(filepath.Join(root, "docs/adding-a-resource.md"))
	if err != nil {
		t.Fatal(err)
	}
	words := goWords(t, root, "actors/gateway", "httpapi/gateway", "actors/actorstest", "cmd/gatehouse")
	var (
		path  = regexp.MustCompile(`^[a-z][a-z0-9_./-]*\.(go|md)$`)
		ident = regexp.MustCompile(`^([A-Za-z_][A-Za-z0-9_]*\.)?([A-Za-z_][A-Za-z0-9_]*)(\(\))?$`)
	)
	files, names := 0, 0
	for _, m := range regexp.MustCompile("`([^`\n]+)`").FindAllStringSubmatch(string(doc), -1) {
		span := m[1]
		switch {
		case path.MatchString(span) && strings.Contains(span, "/"):
			files++
			if _, err := os.Stat(filepath.Join(root, span)); err != nil {
				t.Errorf("docs/adding-a-resource.md names %s, which is gone: %v", span, err)
			}
		case path.MatchString(span): // a bare file name: in one of the packages
			files++
			if !words["file:"+span] {
				t.Errorf("docs/adding-a-resource.md names the file %s, in none of the packages it walks through", span)
			}
		case ident.MatchString(span):
			names++
			for _, part := range strings.Split(strings.TrimSuffix(span, "()"), ".") {
				if !words[part] {
					t.Errorf("docs/adding-a-resource.md shows %s, but %s is no longer in the code", span, part)
				}
			}
		}
	}
	if files < 10 || names < 30 {
		t.Fatalf("found %d file names and %d Go names in the guide: the parser no longer reads it", files, names)
	}
}

// goWords returns every identifier-like word of the Go files under dirs
// (relative to root), and "file:NAME" for each of their file names.
func goWords(t *testing.T, root string, dirs ...string) map[string]bool {
	t.Helper()
	word := regexp.MustCompile(`[A-Za-z_][A-Za-z0-9_]*`)
	out := map[string]bool{}
	for _, d := range dirs {
		err := filepath.WalkDir(filepath.Join(root, d), func(p string, e fs.DirEntry, err error) error {
			if err != nil || e.IsDir() || !strings.HasSuffix(p, ".go") {
				return err
			}
			out["file:"+e.Name()] = true
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			for _, w := range word.FindAll(b, -1) {
				out[string(w)] = true
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}
