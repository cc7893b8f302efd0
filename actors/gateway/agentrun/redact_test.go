package agentrun

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestPreview(t *testing.T) {
	r := newRedactor("weird-provider-credential-42", "abc")
	tests := []struct{ name, in, want string }{
		{"plain", "hello there", "hello there"},
		{"provider key literal", "my key is weird-provider-credential-42!", "my key is [redacted]!"},
		{"short literal ignored", "abc def", "abc def"},
		{"openai key", "use sk-proj-AbCdEf123456789 now", "use [redacted] now"},
		{"gateway key", "gateway_0123456789abcdef0123456789abcdef", "[redacted]"},
		{"service key", "X-API-Key: svc_live_AbCdEfGh12345678", "X-API-Key: [redacted]"},
		{"bearer", "Authorization: Bearer eyJhbGciOi.payload.sig", "Authorization: [redacted]"},
		{"jwt", "token eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.abcdefghijk", "token [redacted]"},
	}
	for _, tt := range tests {
		if got := r.preview(tt.in); got != tt.want {
			t.Errorf("%s: preview(%q) = %q, want %q", tt.name, tt.in, got, tt.want)
		}
	}
	long := strings.Repeat("é", PreviewRunes+50)
	if got := r.preview(long); utf8.RuneCountInString(got) != PreviewRunes+1 || !strings.HasSuffix(got, "…") || !utf8.ValidString(got) {
		t.Errorf("long preview = %d runes", utf8.RuneCountInString(got))
	}
}

func BenchmarkPreview1MiB(b *testing.B) { benchPreview(b, 1<<20) }
func BenchmarkPreview1KiB(b *testing.B) { benchPreview(b, 1<<10) }

// benchPreview previews a message of size bytes with a secret near its
// start.
func benchPreview(b *testing.B, size int) {
	r := newRedactor("weird-provider-credential-42")
	s := "key sk-proj-AbCdEfGh123456789 " + strings.Repeat("lorem ipsum ", size/12)
	b.ReportAllocs()
	b.SetBytes(int64(len(s)))
	for b.Loop() {
		_ = r.preview(s)
	}
}
