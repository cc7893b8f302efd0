package webassets

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"mime"
	"path"
)

// Asset is one embedded file, ready to serve.
type Asset struct {
	Body        []byte
	ContentType string
	ETag        string // strong, quoted
}

// Table holds the files of an embedded directory, read once: serving them
// copies nothing and looks nothing up. Safe for concurrent use.
type Table struct{ files map[string]Asset }

// Load reads every file of fsys. A file whose extension names no media
// type is served as defaultType.
func Load(fsys fs.FS, defaultType string) (*Table, error) {
	t := &Table{files: make(map[string]Asset)}
	err := fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(fsys, p)
		if err != nil {
			return fmt.Errorf("webassets: read %s: %w", p, err)
		}
		sum := sha256.Sum256(b)
		ct := mime.TypeByExtension(path.Ext(p))
		if ct == "" {
			ct = defaultType
		}
		t.files[p] = Asset{Body: b, ContentType: ct, ETag: `"` + hex.EncodeToString(sum[:12]) + `"`}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return t, nil
}

// Get returns the file at name (a path below the directory).
func (t *Table) Get(name string) (Asset, bool) {
	a, ok := t.files[name]
	return a, ok
}
