package webassets

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func write(t *testing.T, path, body string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestCheck(t *testing.T) {
	tests := []struct {
		name    string
		pin     string // uplot's version in package.json
		vendor  string // the vendored copy
		install bool
		want    string // substring of the error; "" for none
	}{
		{"agree", "1.0.0", "lib v1", true, ""},
		{"copy differs", "1.0.0", "lib v0", true, "vendor/lib.js differs"},
		{"pin moved", "1.0.1", "lib v1", true, "pins 1.0.1, installed 1.0.0"},
		{"range", "^1.0.0", "lib v1", true, "exact version"},
		{"not installed", "1.0.0", "lib v1", false, "not installed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			npm, dst := filepath.Join(dir, "npm"), filepath.Join(dir, "web")
			write(t, filepath.Join(npm, "package.json"), `{"dependencies":{"uplot":"`+tt.pin+`"}}`)
			write(t, filepath.Join(npm, "vendor.txt"), "# comment\nnode_modules/uplot/dist/lib.js\tvendor/lib.js\n")
			if tt.install {
				write(t, filepath.Join(npm, "node_modules/uplot/package.json"), `{"version":"1.0.0"}`)
				write(t, filepath.Join(npm, "node_modules/uplot/dist/lib.js"), "lib v1")
			}
			write(t, filepath.Join(dst, "vendor/lib.js"), tt.vendor)
			err := Check(npm, dst)
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("Check = %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("Check = %v, want %q", err, tt.want)
			}
			if !tt.install && !errors.Is(err, ErrNotInstalled) {
				t.Errorf("Check = %v, want ErrNotInstalled", err)
			}
		})
	}
}

func TestListRefusesEscapes(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "vendor.txt"), "node_modules/a/b.js ../../etc/x\n")
	if _, err := List(dir); err == nil {
		t.Fatal("List accepted a destination outside the embedded directory")
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "app.js"), "x")
	write(t, filepath.Join(dir, "vendor/LICENSE"), "MIT")
	tbl, err := Load(os.DirFS(dir), "text/plain; charset=utf-8")
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"app.js": "text/javascript; charset=utf-8", "vendor/LICENSE": "text/plain; charset=utf-8"} {
		a, ok := tbl.Get(name)
		if !ok || a.ContentType != want || len(a.ETag) != 26 {
			t.Errorf("%s = %+v %v, want type %s and a quoted 24-hex ETag", name, a, ok, want)
		}
	}
	if _, ok := tbl.Get("missing.js"); ok {
		t.Error("Get found a missing file")
	}
}
