package gateway

import (
	"archive/zip"
	"bytes"
	"errors"
	"io/fs"
	"strings"
	"testing"
)

type zentry struct {
	name, body string
	mode       fs.FileMode
	store      bool // no compression
}

func makeZip(t testing.TB, entries ...zentry) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, e := range entries {
		h := &zip.FileHeader{Name: e.name, Method: zip.Deflate}
		if e.store {
			h.Method = zip.Store
		}
		if e.mode != 0 {
			h.SetMode(e.mode)
		}
		w, err := zw.CreateHeader(h)
		if err != nil {
			t.Fatal(err)
		}
		w.Write([]byte(e.body))
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

const goodMD = "---\nname: PDF Tools\ndescription: read PDFs\ntags: [pdf, docs]\n---\n# PDF tools\nUse pdftotext.\n"

// ZipBomb is a small archive whose one entry inflates to 60 MB of zeros.
func zipBomb(t testing.TB) []byte {
	return makeZip(t, zentry{name: "SKILL.md", body: goodMD}, zentry{name: "zeros.bin", body: strings.Repeat("\x00", 60<<20)})
}

func TestParseSkillZip(t *testing.T) {
	ok, err := parseSkillZip(makeZip(t, zentry{name: "pdf/", mode: fs.ModeDir | 0o755}, zentry{name: "pdf/SKILL.md", body: goodMD},
		zentry{name: "pdf/scripts/run.sh", body: "echo hi"}))
	if err != nil || ok.name != "PDF Tools" || ok.root != "pdf" || len(ok.tags) != 2 || len(ok.files) != 2 || slugOf(ok.name) != "pdf-tools" {
		t.Fatalf("parse = %+v, %v", ok, err)
	}
	bomb := zipBomb(t)
	if len(bomb) > 200<<10 {
		t.Fatalf("the bomb is %d bytes", len(bomb))
	}
	manyFiles := []zentry{{name: "SKILL.md", body: goodMD}}
	for i := range MaxSkillEntries + 1 {
		manyFiles = append(manyFiles, zentry{name: "f" + strings.Repeat("x", i%7) + string(rune('a'+i%26)) + "/" + strings.Repeat("y", i/26+1)})
	}
	ratio := makeZip(t, zentry{name: "SKILL.md", body: goodMD}, zentry{name: "z.bin", body: strings.Repeat("\x00", 2<<20)})
	for _, tt := range []struct {
		name, want string
		zip        []byte
	}{
		{"not a zip", "not a ZIP", []byte("PK nope")},
		{"dot dot", "..", makeZip(t, zentry{name: "SKILL.md", body: goodMD}, zentry{name: "../evil", body: "x"})},
		{"absolute", "absolute", makeZip(t, zentry{name: "SKILL.md", body: goodMD}, zentry{name: "/etc/cron.d/x", body: "x"})},
		{"symlink", "links", makeZip(t, zentry{name: "SKILL.md", body: goodMD}, zentry{name: "l", body: "/etc/passwd", mode: fs.ModeSymlink | 0o777})},
		{"device", "device", makeZip(t, zentry{name: "SKILL.md", body: goodMD}, zentry{name: "d", mode: fs.ModeDevice | 0o600})},
		{"duplicate", "twice", makeZip(t, zentry{name: "SKILL.md", body: goodMD}, zentry{name: "a", body: "1"}, zentry{name: "./a", body: "2"})},
		{"too many entries", "entries", makeZip(t, manyFiles...)},
		{"zip bomb", "inflates", bomb},
		{"ratio", "zip bomb", ratio},
		{"no SKILL.md", "no SKILL.md", makeZip(t, zentry{name: "README.md", body: "x"})},
		{"empty SKILL.md", "empty", makeZip(t, zentry{name: "SKILL.md", body: " \n"})},
		{"no name", "no name", makeZip(t, zentry{name: "SKILL.md", body: "---\ndescription: x\n---\nbody"})},
		{"no front matter", "front matter", makeZip(t, zentry{name: "SKILL.md", body: "# just markdown"})},
		{"bad yaml", "YAML", makeZip(t, zentry{name: "SKILL.md", body: "---\nname: [unclosed\n---\n"})},
		{"not utf-8", "UTF-8", makeZip(t, zentry{name: "SKILL.md", body: goodMD}, zentry{name: "bad\xff.txt", body: "x"})},
		{"two folders", "no SKILL.md", makeZip(t, zentry{name: "a/SKILL.md", body: goodMD}, zentry{name: "b/x", body: "x"})},
	} {
		_, err := parseSkillZip(tt.zip)
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v, want ErrInvalid naming %q", tt.name, err, tt.want)
		}
	}
}

func FuzzParseSkillZip(f *testing.F) {
	f.Add(makeZip(f, zentry{name: "SKILL.md", body: goodMD}))
	f.Add(makeZip(f, zentry{name: "x/SKILL.md", body: goodMD}, zentry{name: "x/y", body: "z"}))
	f.Add([]byte("PK\x03\x04"))
	f.Fuzz(func(t *testing.T, b []byte) {
		ps, err := parseSkillZip(b)
		if err == nil && (ps.name == "" || ps.skillMD == "") {
			t.Fatalf("accepted without a name or SKILL.md: %+v", ps)
		}
	})
}
