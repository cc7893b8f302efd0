package gateway

import (
	"archive/zip"
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"path"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
)

// Limits of a skill upload.
const (
	MaxSkillZip         = 20 << 20 // bytes of the ZIP
	MaxSkillEntries     = 500
	MaxSkillUnzipped    = 50 << 20 // total uncompressed bytes
	MaxSkillRatio       = 100      // uncompressed / compressed, per file above 1 MiB
	MaxSkillMD          = 64 << 10
	skillRatioThreshold = 1 << 20
)

// SkillFile is one entry of a skill version.
type SkillFile struct {
	Path  string `json:"path"`
	Size  int64  `json:"size"`
	IsDir bool   `json:"is_dir"`
}

// parsedSkill is a validated skill archive.
type parsedSkill struct {
	name, description string
	tags              []string
	skillMD           string
	root              string // the one top-level folder holding SKILL.md, or ""
	files             []SkillFile
}

type frontMatter struct {
	Name        string   `yaml:"name"`
	Description string   `yaml:"description"`
	Tags        []string `yaml:"tags"`
}

func skillErr(format string, args ...any) error {
	return fmt.Errorf("file: "+format+": %w", append(args, ErrInvalid)...)
}

// parseSkillZip validates a skill archive: every entry a regular file or
// a directory with a clean, relative, UTF-8 name, no duplicates, at most
// MaxSkillEntries entries and MaxSkillUnzipped bytes once inflated (the
// bytes are counted as they inflate: declared sizes can lie), no file
// inflating more than MaxSkillRatio times past 1 MiB, and a non-empty
// SKILL.md (at the root or in the one top-level folder) whose YAML front
// matter names the skill.
func parseSkillZip(data []byte) (parsedSkill, error) {
	var ps parsedSkill
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return ps, skillErr("not a ZIP archive")
	}
	if len(zr.File) > MaxSkillEntries {
		return ps, skillErr("%d entries, at most %d", len(zr.File), MaxSkillEntries)
	}
	seen := map[string]bool{}
	var declared uint64
	tops := map[string]bool{}
	for _, f := range zr.File {
		name := f.Name
		switch {
		case !utf8.ValidString(name) || strings.ContainsRune(name, 0):
			return ps, skillErr("an entry name is not valid UTF-8")
		case strings.HasPrefix(name, "/") || strings.Contains(name, "\\") || (len(name) > 1 && name[1] == ':'):
			return ps, skillErr("entry %q: absolute or Windows paths are refused", name)
		case slices.Contains(strings.Split(strings.TrimSuffix(name, "/"), "/"), ".."):
			return ps, skillErr("entry %q: .. is refused", name)
		}
		mode := f.Mode()
		if mode&(fs.ModeSymlink|fs.ModeDevice|fs.ModeCharDevice|fs.ModeNamedPipe|fs.ModeSocket|fs.ModeIrregular) != 0 {
			return ps, skillErr("entry %q: links and device files are refused", name)
		}
		clean := path.Clean(name)
		if seen[clean] {
			return ps, skillErr("entry %q appears twice", clean)
		}
		seen[clean] = true
		declared += f.UncompressedSize64
		top, _, _ := strings.Cut(clean, "/")
		tops[top] = true
	}
	if declared > MaxSkillUnzipped {
		return ps, skillErr("inflates to %d bytes, at most %d", declared, MaxSkillUnzipped)
	}
	mdName := "SKILL.md"
	if !seen[mdName] {
		if len(tops) == 1 {
			for top := range tops {
				ps.root, mdName = top, top+"/SKILL.md"
			}
		}
		if !seen[mdName] {
			return ps, skillErr("no SKILL.md at the root or in the one top-level folder")
		}
	}
	var total int64
	for _, f := range zr.File {
		clean := path.Clean(f.Name)
		rel := strings.TrimPrefix(strings.TrimPrefix(clean, ps.root), "/")
		if ps.root != "" && clean == ps.root {
			continue
		}
		if f.FileInfo().IsDir() {
			ps.files = append(ps.files, SkillFile{Path: rel, IsDir: true})
			continue
		}
		n, content, err := inflate(f, MaxSkillUnzipped-total, clean == mdName)
		if err != nil {
			return ps, err
		}
		total += n
		if n > skillRatioThreshold && n/max(int64(f.CompressedSize64), 1) > MaxSkillRatio {
			return ps, skillErr("entry %q inflates %d times: a zip bomb", clean, n/max(int64(f.CompressedSize64), 1))
		}
		if clean == mdName {
			ps.skillMD = string(content)
		}
		ps.files = append(ps.files, SkillFile{Path: rel, Size: n})
	}
	if strings.TrimSpace(ps.skillMD) == "" {
		return ps, skillErr("SKILL.md is empty")
	}
	fm, err := frontMatterOf(ps.skillMD)
	if err != nil {
		return ps, err
	}
	ps.name, ps.description, ps.tags = fm.Name, fm.Description, fm.Tags
	slices.SortFunc(ps.files, func(a, b SkillFile) int { return strings.Compare(a.Path, b.Path) })
	return ps, nil
}

// inflate reads f, at most left bytes (more: the archive is too large),
// keeping the content when keep (SKILL.md, at most MaxSkillMD).
func inflate(f *zip.File, left int64, keep bool) (int64, []byte, error) {
	rc, err := f.Open()
	if err != nil {
		return 0, nil, skillErr("entry %q cannot be read", f.Name)
	}
	defer rc.Close()
	var buf bytes.Buffer
	var w io.Writer = io.Discard
	if keep {
		w = &buf
	}
	n, err := io.Copy(w, io.LimitReader(rc, left+1))
	switch {
	case n > left:
		return n, nil, skillErr("inflates past %d bytes", MaxSkillUnzipped)
	case err != nil:
		return n, nil, skillErr("entry %q is damaged", f.Name)
	case keep && n > MaxSkillMD:
		return n, nil, skillErr("SKILL.md is over %d bytes", MaxSkillMD)
	}
	return n, buf.Bytes(), nil
}

// frontMatterOf reads the YAML front matter of a SKILL.md.
func frontMatterOf(md string) (frontMatter, error) {
	var fm frontMatter
	md = strings.TrimPrefix(md, "\ufeff")
	rest, ok := strings.CutPrefix(strings.ReplaceAll(md, "\r\n", "\n"), "---\n")
	if !ok {
		return fm, skillErr("SKILL.md must start with YAML front matter (---)")
	}
	head, _, ok := strings.Cut(rest, "\n---")
	if !ok {
		return fm, skillErr("SKILL.md's front matter is not closed (---)")
	}
	if err := yaml.Unmarshal([]byte(head), &fm); err != nil {
		return fm, skillErr("SKILL.md's front matter is not valid YAML")
	}
	if strings.TrimSpace(fm.Name) == "" {
		return fm, skillErr("SKILL.md's front matter has no name")
	}
	return fm, nil
}

var slugUnsafe = regexp.MustCompile(`[^a-z0-9]+`)

// slugOf makes a skill's slug from its name.
func slugOf(name string) string {
	s := strings.Trim(slugUnsafe.ReplaceAllString(strings.ToLower(name), "-"), "-")
	if len(s) > 64 {
		s = strings.TrimRight(s[:64], "-")
	}
	return s
}

// skillFileFrom reads one file of a skill archive (path relative to its
// root); ErrNotFound.
func skillFileFrom(data []byte, root, rel string) ([]byte, error) {
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return nil, err
	}
	want := path.Clean(path.Join(root, rel))
	for _, f := range zr.File {
		if path.Clean(f.Name) == want && !f.FileInfo().IsDir() {
			rc, err := f.Open()
			if err != nil {
				return nil, err
			}
			defer rc.Close()
			return io.ReadAll(io.LimitReader(rc, MaxSkillUnzipped))
		}
	}
	return nil, ErrNotFound
}
