// Package webassets holds the browser assets embedded in the binary (the
// console, the /docs viewer): Table serves an embedded directory read
// once, and Check compares the libraries vendored into the tree for
// go:embed against the npm packages they are pinned to, so a plain `go
// build` binary carries them and a test fails when the committed copy and
// the pin disagree.
//
// Each vendoring npm project (a directory with package.json and
// package-lock.json) holds a vendor.txt: one "<source> <destination>"
// pair per line, the source under the npm project (in node_modules after
// `npm ci`), the destination under the embedded directory. `make
// web-assets` copies them; Check compares them.
package webassets

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// ErrNotInstalled is returned by Check when the npm project's packages
// are not installed (run `npm ci` in it, as `make test` does).
var ErrNotInstalled = errors.New("npm packages not installed")

// Pair is one vendored file.
type Pair struct{ From, To string }

// List reads npmDir/vendor.txt.
func List(npmDir string) ([]Pair, error) {
	f, err := os.Open(filepath.Join(npmDir, "vendor.txt"))
	if err != nil {
		return nil, fmt.Errorf("webassets: %w", err)
	}
	defer f.Close()
	var out []Pair
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		if len(fields) != 2 || filepath.IsAbs(fields[1]) || strings.Contains(fields[1], "..") {
			return nil, fmt.Errorf("webassets: %s/vendor.txt:%d: want \"<source> <destination>\"", npmDir, n)
		}
		out = append(out, Pair{From: fields[0], To: fields[1]})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("webassets: read %s/vendor.txt: %w", npmDir, err)
	}
	return out, nil
}

// Check reports every difference between the vendored files under
// dstDir and their sources in the installed npm project npmDir, and
// every dependency of package.json that is not pinned to an exact
// version or whose installed version differs from its pin.
func Check(npmDir, dstDir string) error {
	pins, err := pinned(npmDir)
	if err != nil {
		return err
	}
	var problems []string
	for name, want := range pins {
		got, err := installedVersion(npmDir, name)
		if errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("webassets: %s: %w", npmDir, ErrNotInstalled)
		}
		if err != nil {
			return err
		}
		if got != want {
			problems = append(problems, fmt.Sprintf("%s: package.json pins %s, installed %s", name, want, got))
		}
	}
	pairs, err := List(npmDir)
	if err != nil {
		return err
	}
	for _, p := range pairs {
		src, err := os.ReadFile(filepath.Join(npmDir, p.From))
		if err != nil {
			problems = append(problems, fmt.Sprintf("source %s: %v", p.From, err))
			continue
		}
		dst, err := os.ReadFile(filepath.Join(dstDir, p.To))
		if err != nil {
			problems = append(problems, fmt.Sprintf("vendored %s: %v", p.To, err))
			continue
		}
		if !bytes.Equal(src, dst) {
			problems = append(problems, fmt.Sprintf("%s differs from %s", filepath.Join(dstDir, p.To), p.From))
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("webassets: %s and %s disagree (run `make web-assets`):\n  %s",
			npmDir, dstDir, strings.Join(problems, "\n  "))
	}
	return nil
}

// pinned returns package.json's dependencies, refusing version ranges.
func pinned(npmDir string) (map[string]string, error) {
	b, err := os.ReadFile(filepath.Join(npmDir, "package.json"))
	if err != nil {
		return nil, fmt.Errorf("webassets: %w", err)
	}
	var pkg struct {
		Dependencies map[string]string `json:"dependencies"`
	}
	if err := json.Unmarshal(b, &pkg); err != nil {
		return nil, fmt.Errorf("webassets: %s/package.json: %w", npmDir, err)
	}
	for name, v := range pkg.Dependencies {
		if v == "" || strings.ContainsAny(v, "^~<>=*xX| ") {
			return nil, fmt.Errorf("webassets: %s/package.json: %s must be pinned to an exact version, not %q", npmDir, name, v)
		}
	}
	return pkg.Dependencies, nil
}

func installedVersion(npmDir, name string) (string, error) {
	b, err := os.ReadFile(filepath.Join(npmDir, "node_modules", name, "package.json"))
	if err != nil {
		return "", err
	}
	var pkg struct {
		Version string `json:"version"`
	}
	if err := json.Unmarshal(b, &pkg); err != nil {
		return "", fmt.Errorf("webassets: %s's package.json: %w", name, err)
	}
	return pkg.Version, nil
}
