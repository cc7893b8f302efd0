package agentrun

import (
	"regexp"
	"strings"
	"unicode/utf8"
)

// PreviewRunes is how much of a run's input, output or error a trace
// keeps.
const PreviewRunes = 200

// previewMargin is how much text past the preview's cut is redacted with
// it, so that a secret straddling the cut is still matched whole (or by
// a prefix long enough to match) and never shown in part. Secret-shaped
// tokens are far shorter; the run's provider key and a tool's secrets
// widen the margin to their own length.
const previewMargin = 4 << 10

// secretShaped matches what looks like a credential in free text: API
// keys of the common shapes (OpenAI/Anthropic sk-…, gateway_…,
// svc_live_…, GitHub, AWS, Slack tokens), bearer tokens, and JWTs.
var secretShaped = regexp.MustCompile(`(?i)\b(sk-[a-z0-9_-]{8,}|gateway_[a-f0-9]{8,}|svc_live_[a-z0-9]{8,}|gh[pousr]_[a-z0-9]{20,}|akia[a-z0-9]{16}|xox[abpr]-[a-z0-9-]{10,})|\bbearer\s+[a-z0-9._~+/=-]{8,}|\beyJ[a-z0-9_-]{8,}\.[a-z0-9_-]{8,}\.[a-z0-9_-]{8,}`)

// secretStarts are how secretShaped's matches begin, in lower case, one
// string of accepted letters per position: every match starts with one
// of these (bearer's and the JWT's included), so text holding none of
// them, in any case, has nothing for the regexp to find.
var secretStarts = [][]string{
	{"s", "k", "-"},
	{"g", "a", "t", "e", "w", "a", "y", "_"},
	{"s", "v", "c", "_", "l", "i", "v", "e", "_"},
	{"g", "h", "pousr", "_"},
	{"a", "k", "i", "a"},
	{"x", "o", "x", "abpr", "-"},
	{"b", "e", "a", "r", "e", "r"},
	{"e", "y", "j"},
}

// secretFirst lists, by the byte a match can start on, the starts
// beginning there: their first letters in either case, and 0xC5, the
// first byte of ſ (U+017F), which (?i) matches as s.
var secretFirst = func() (t [256][][]string) {
	for _, st := range secretStarts {
		c := st[0][0]
		t[c] = append(t[c], st)
		t[c-'a'+'A'] = append(t[c-'a'+'A'], st)
		if c == 's' {
			t[0xC5] = append(t[0xC5], st)
		}
	}
	return t
}()

// mayHoldSecretShape reports whether s holds one of secretStarts at some
// offset, letters compared as secretShaped's (?i) compares them: ASCII
// case folded, and the two non-ASCII runes that fold to ASCII letters,
// ſ (U+017F) as s and the Kelvin sign (U+212A) as k. False means
// secretShaped cannot match s; true means it may. One pass over s,
// without allocating: most previews hold no credential, and the regexp
// is the costly part of a preview.
func mayHoldSecretShape(s string) bool {
	for i := 0; i < len(s); i++ {
		for _, st := range secretFirst[s[i]] {
			if foldedPrefix(s[i:], st) {
				return true
			}
		}
	}
	return false
}

// foldedPrefix reports whether s begins with one letter of each of
// sets, in order, compared as mayHoldSecretShape says.
func foldedPrefix(s string, sets []string) bool {
	j := 0
	for _, set := range sets {
		if j >= len(s) {
			return false
		}
		c, n := s[j], 1
		switch {
		case 'A' <= c && c <= 'Z':
			c += 'a' - 'A'
		case strings.HasPrefix(s[j:], "\u017f"):
			c, n = 's', 2
		case strings.HasPrefix(s[j:], "\u212a"):
			c, n = 'k', 3
		}
		if strings.IndexByte(set, c) < 0 {
			return false
		}
		j += n
	}
	return true
}

// redactor turns text into a trace preview: secrets out, then
// truncated. The run's own provider key is removed wherever it appears,
// whatever its shape.
type redactor struct {
	literals []string
	margin   int // previewMargin, or the longest literal if longer
}

func newRedactor(literals ...string) *redactor {
	r := &redactor{margin: previewMargin}
	for _, l := range literals {
		if len(l) >= 6 { // shorter is not a real credential, and would blank ordinary words
			r.literals = append(r.literals, l)
			r.margin = max(r.margin, len(l))
		}
	}
	return r
}

// with returns a redactor that also removes literals.
func (r *redactor) with(literals ...string) *redactor {
	n := newRedactor(literals...)
	n.literals = append(n.literals, r.literals...)
	n.margin = max(n.margin, r.margin)
	return n
}

// preview redacts s and keeps its first PreviewRunes runes. The work is
// bounded by what is kept, whatever len(s): s is cut first to
// PreviewRunes runes plus the margin, that window is redacted, then cut
// to PreviewRunes runes.
func (r *redactor) preview(s string) string {
	s, cut := window(s, r.margin)
	for _, l := range r.literals {
		s = strings.ReplaceAll(s, l, "[redacted]")
	}
	if mayHoldSecretShape(s) {
		s = secretShaped.ReplaceAllString(s, "[redacted]")
	}
	n := 0
	for i := range s {
		if n == PreviewRunes {
			return s[:i] + "…"
		}
		n++
	}
	if cut {
		return s + "…"
	}
	return s
}

// window returns the head of s that a preview reads: its first
// PreviewRunes runes and margin bytes more (cut on a rune boundary), and
// whether anything was cut off.
func window(s string, margin int) (string, bool) {
	n := 0
	for i := range s {
		if n == PreviewRunes {
			return head(s, i+margin), i+margin < len(s)
		}
		n++
	}
	return s, false
}

// head is s cut to at most n bytes, on a rune boundary.
func head(s string, n int) string {
	if n >= len(s) {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
