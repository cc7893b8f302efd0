package llm

import (
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestGeminiSSEFraming covers the framings the genai SDK's own stream
// tests use (no space after "data:", extra blank lines, \r\n, a last
// event without its blank line) and the rest of SSE (comments, other
// fields, multi-line data), plus a bare pretty-printed JSON error.
func TestGeminiSSEFraming(t *testing.T) {
	tests := []struct {
		name, in string
		want     []string
	}{
		{"no space", "data:{\"a\":1}\n\ndata:{\"b\":2}\n\n", []string{`{"a":1}`, `{"b":2}`}},
		{"blank lines", "data:{\"a\":1}\n\n\n\ndata:{\"b\":2}\n\n", []string{`{"a":1}`, `{"b":2}`}},
		{"crlf", "data: {\"a\":1}\r\n\r\ndata: {\"b\":2}\r\n\r\n", []string{`{"a":1}`, `{"b":2}`}},
		{"last without blank line", "data:{\"a\":1}\n\ndata:{\"b\":2}", []string{`{"a":1}`, `{"b":2}`}},
		{"empty", "", nil},
		{"comments and fields", ": ping\nevent: message\nid: 7\nretry: 10\ndata: {\"a\":1}\n\n", []string{`{"a":1}`}},
		{"multi-line data", "data: {\"a\":\ndata: 1}\n\n", []string{"{\"a\":\n1}"}},
		{"bare error", "data: {\"a\":1}\n\n{\n  \"error\": {\n    \"code\": 500\n  }\n}\n", []string{`{"a":1}`, "{\n  \"error\": {\n    \"code\": 500\n  }\n}"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newGemSSE(strings.NewReader(tt.in), 1024, 512)
			var got []string
			for {
				ev, err := s.next()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					t.Fatalf("next = %v", err)
				}
				got = append(got, string(ev))
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
		})
	}
}

func TestGeminiSSEBounds(t *testing.T) {
	for _, in := range []string{
		"data: " + strings.Repeat("x", 2000) + "\n\n",                     // one long line
		strings.Repeat("data: "+strings.Repeat("x", 100)+"\n", 20) + "\n", // many lines, one event
	} {
		_, err := newGemSSE(strings.NewReader(in), 1024, 512).next()
		var e *Error
		if !errors.As(err, &e) || e.Kind != KindMalformed {
			t.Errorf("next over an event of %d bytes = %v, want TooLarge", len(in), err)
		}
	}
}
