package runtime

import (
	"regexp"
	"strings"
	"unicode/utf8"
)

// PreviewRunes is how much of a run's input, output or error a trace
// keeps.
const PreviewRunes = 200

// secretShaped matches what looks like a credential in free text: API
// keys of the common shapes (OpenAI/Anthropic sk-…, gateway_…,
// svc_live_…, GitHub, AWS, Slack tokens), bearer tokens, and JWTs.
var secretShaped = regexp.MustCompile(`(?i)\b(sk-[a-z0-9_-]{8,}|gateway_[a-f0-9]{8,}|svc_live_[a-z0-9]{8,}|gh[pousr]_[a-z0-9]{20,}|akia[a-z0-9]{16}|xox[abpr]-[a-z0-9-]{10,})|\bbearer\s+[a-z0-9._~+/=-]{8,}|\beyJ[a-z0-9_-]{8,}\.[a-z0-9_-]{8,}\.[a-z0-9_-]{8,}`)

// redactor turns text into a trace preview: secrets out, then
// truncated. The run's own provider key is removed wherever it appears,
// whatever its shape.
type redactor struct{ literals []string }

func newRedactor(literals ...string) *redactor {
	r := &redactor{}
	for _, l := range literals {
		if len(l) >= 6 { // shorter is not a real credential, and would blank ordinary words
			r.literals = append(r.literals, l)
		}
	}
	return r
}

// with returns a redactor that also removes literals.
func (r *redactor) with(literals ...string) *redactor {
	n := newRedactor(literals...)
	n.literals = append(n.literals, r.literals...)
	return n
}

// preview redacts s and keeps its first PreviewRunes runes.
func (r *redactor) preview(s string) string {
	for _, l := range r.literals {
		s = strings.ReplaceAll(s, l, "[redacted]")
	}
	s = secretShaped.ReplaceAllString(s, "[redacted]")
	if utf8.RuneCountInString(s) <= PreviewRunes {
		return s
	}
	n := 0
	for i := range s {
		if n == PreviewRunes {
			return s[:i] + "…"
		}
		n++
	}
	return s
}
