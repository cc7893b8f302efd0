package agentrun

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// previewOracle is preview as it was before mayHoldSecretShape: the
// regexp runs on every window. The fast path must redact exactly as it
// does.
func previewOracle(r *redactor, s string) string {
	s, cut := window(s, r.margin)
	for _, l := range r.literals {
		s = strings.ReplaceAll(s, l, "[redacted]")
	}
	s = secretShaped.ReplaceAllString(s, "[redacted]")
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

// secretPieces are the fragments random previews are built from: the
// starts of every credential shape in mixed case, the non-ASCII runes
// (?i) folds to s and k, separators that make and break \b, and filler.
var secretPieces = []string{
	"sk-", "SK-", "sK-", "ſk-", "sK-", "gateway_", "GATEWAY_", "svc_live_", "SVC_LIVE_", "ſvc_live_",
	"gh", "GH", "p", "o", "u", "s", "r", "ſ", "_", "akia", "AKIA", "aKia", "aKIA", "xox", "XOX", "a", "b",
	"-", "bearer", "BEARER", "Bearer ", " ", "\t", "\n", "eyJ", "EYJ", "eyj", ".", "0123456789", "abcdef",
	"ABCDEF", "Z", "é", "x", "k", "K", "=", "/", "+", "~", "lorem ipsum ", "\xc5", "\xe2\x84", "\xff",
}

// randomPreviewText joins n random pieces.
func randomPreviewText(rng *rand.Rand, n int) string {
	var b strings.Builder
	for range n {
		b.WriteString(secretPieces[rng.IntN(len(secretPieces))])
	}
	return b.String()
}

// TestPreviewMatchesOracle checks the fast path against the old preview
// on texts built to hold credential shapes, near misses and folded
// letters, and on every piece alone and after a word character.
func TestPreviewMatchesOracle(t *testing.T) {
	r := newRedactor("weird-provider-credential-42")
	check := func(s string) {
		t.Helper()
		if got, want := r.preview(s), previewOracle(r, s); got != want {
			t.Fatalf("preview(%q) = %q, the regexp on every window gives %q", s, got, want)
		}
	}
	for _, p := range secretPieces {
		check(p + "abcdefgh0123456789abcdefgh.abcdefgh.abcdefgh")
		check("x" + p + "abcdefgh0123456789abcdefgh")
	}
	rng := rand.New(rand.NewPCG(35, 35))
	for range 20_000 {
		check(randomPreviewText(rng, 1+rng.IntN(40)))
	}
}

// FuzzPreviewMatchesOracle is TestPreviewMatchesOracle on any text.
func FuzzPreviewMatchesOracle(f *testing.F) {
	for _, p := range secretPieces {
		f.Add(p + "abcdefgh0123456789abcdefgh")
	}
	f.Add("xſk-abcdefgh0123")
	f.Add("a\u212Aia0123456789abcdef")
	r := newRedactor("weird-provider-credential-42")
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := r.preview(s), previewOracle(r, s); got != want {
			t.Fatalf("preview(%q) = %q, the regexp on every window gives %q", s, got, want)
		}
	})
}

// BenchmarkPreviewPlain previews text without a credential shape (most
// previews), with the fast path and with the regexp on every window.
func BenchmarkPreviewPlain(b *testing.B) {
	r := newRedactor("weird-provider-credential-42")
	for _, size := range []int{1 << 10, 1 << 20} {
		s := strings.Repeat("lorem ipsum ", size/12)
		for _, c := range []struct {
			name string
			fn   func(*redactor, string) string
		}{{"fast", (*redactor).preview}, {"oracle", previewOracle}} {
			b.Run(fmt.Sprintf("%s/%dKiB", c.name, size>>10), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					_ = c.fn(r, s)
				}
			})
		}
	}
}
