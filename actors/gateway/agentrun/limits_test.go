package agentrun

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	goruntime "runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"gatehouse/actors/gateway"
)

// allocated returns the bytes fn allocates.
func allocated(fn func()) uint64 {
	var before, after goruntime.MemStats
	goruntime.GC()
	goruntime.ReadMemStats(&before)
	fn()
	goruntime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestPreviewBoundedWork: a preview of a 4 MiB message costs what the
// preview keeps, not the message: its secret near the start is redacted,
// and the redaction allocates kilobytes (it used to copy the 4 MiB, and
// run the regexp over all of it: 370 ms per MB).
func TestPreviewBoundedWork(t *testing.T) {
	r := newRedactor("weird-provider-credential-42")
	const secret = "sk-proj-AbCdEfGh123456789QQQQ"
	big := "my key is " + secret + " and my other is weird-provider-credential-42 " + strings.Repeat("lorem ipsum ", 4<<20/12)
	var got string
	n := allocated(func() { got = r.preview(big) })
	if strings.Contains(got, "sk-proj") || strings.Contains(got, "QQQQ") || strings.Contains(got, "weird-provider") || !strings.HasPrefix(got, "my key is [redacted] and my other is [redacted] lorem") {
		t.Errorf("preview(4 MiB) = %q, want both secrets redacted", got)
	}
	if utf8.RuneCountInString(got) != PreviewRunes+1 || !strings.HasSuffix(got, "…") {
		t.Errorf("preview(4 MiB) = %d runes, want %d and an ellipsis", utf8.RuneCountInString(got), PreviewRunes+1)
	}
	if n > 256<<10 {
		t.Errorf("preview(4 MiB) allocated %d bytes, want the work bounded by the preview (< 256 KiB)", n)
	}
}

// TestPreviewStraddlingSecret: a secret that begins before the preview's
// cut and ends after it is redacted, not shown in part; so is a long
// literal that straddles the margin.
func TestPreviewStraddlingSecret(t *testing.T) {
	long := "prov-" + strings.Repeat("Z", 2*previewMargin)
	r := newRedactor(long)
	tests := []struct{ name, secret string }{
		{"token", "sk-proj-" + strings.Repeat("Q", 60)},
		{"long token", "sk-proj-" + strings.Repeat("Q", 3*previewMargin)},
		{"jwt", "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0QQQQ.abcdefghijkQQQQ"},
		{"literal", long},
	}
	for _, tt := range tests {
		for _, at := range []int{PreviewRunes - 5, PreviewRunes - 1, PreviewRunes - 30} {
			s := strings.Repeat("é", at) + " " + tt.secret + " " + strings.Repeat("tail ", 1<<18)
			got := r.preview(s)
			if strings.Contains(got, "QQ") || strings.Contains(got, "ZZ") || strings.Contains(got, "sk-") || strings.Contains(got, "eyJ") || strings.Contains(got, "prov-") {
				t.Errorf("%s at rune %d: preview = %q, shows part of the secret", tt.name, at, got)
			}
			if !utf8.ValidString(got) {
				t.Errorf("%s at rune %d: preview is not UTF-8", tt.name, at)
			}
		}
	}
	if got := r.preview("short " + long + " text"); got != "short [redacted] text" {
		t.Errorf("preview(short) = %q", got)
	}
}

// TestTraceOfLargeMessage: the trace of a run on a 4 MiB message keeps a
// redacted preview of it.
func TestTraceOfLargeMessage(t *testing.T) {
	f := newFake()
	f.add("echo", gateway.ProviderEcho, "", `{"delay_ms":0}`, nil)
	rt := newRuntime(t, f)
	if err := rt.SetLimits(Limits{MaxMessageBytes: 8 << 20, MaxAnswerBytes: 8 << 20}); err != nil {
		t.Fatal(err)
	}
	msg := "token sk-proj-AbCdEfGh123456789QQQQ " + strings.Repeat("x", 4<<20)
	if _, err := rt.Turn(context.Background(), gateway.Principal{Trusted: true}, TurnRequest{Agent: "echo", Messages: []Message{{Role: "user", Content: msg}}}); err != nil {
		t.Fatal(err)
	}
	tr := f.lastTrace(t)
	for _, p := range []string{tr.InputPreview, tr.OutputPreview, tr.Spans[0].InputPreview, tr.Spans[0].OutputPreview} {
		if strings.Contains(p, "QQQQ") || !strings.Contains(p, "[redacted]") || utf8.RuneCountInString(p) > PreviewRunes+1 {
			t.Errorf("preview = %q, want the secret redacted within %d runes", p, PreviewRunes)
		}
	}
}

func TestMessageTooLarge(t *testing.T) {
	f := newFake()
	f.add("echo", gateway.ProviderEcho, "", `{"delay_ms":0}`, nil)
	rt := newRuntime(t, f)
	if err := rt.SetLimits(Limits{MaxMessageBytes: 100, MaxAnswerBytes: 1 << 20}); err != nil {
		t.Fatal(err)
	}
	p := gateway.Principal{Trusted: true}
	msgs := []Message{{Role: "system", Content: strings.Repeat("s", 60)}, {Role: "user", Content: strings.Repeat("u", 41)}}
	_, err := rt.Turn(context.Background(), p, TurnRequest{Agent: "echo", Messages: msgs})
	if !errors.Is(err, ErrMessageTooLarge) || !errors.Is(err, gateway.ErrTooLarge) {
		t.Errorf("Turn(101 bytes, limit 100) = %v, want ErrMessageTooLarge", err)
	}
	msgs[1].Content = msgs[1].Content[1:]
	if _, err := rt.Turn(context.Background(), p, TurnRequest{Agent: "echo", Messages: msgs}); err != nil {
		t.Errorf("Turn(100 bytes, limit 100) = %v", err)
	}
	if err := rt.SetLimits(Limits{MaxAnswerBytes: 1}); err == nil || !strings.Contains(err.Error(), "MaxMessageBytes") {
		t.Errorf("SetLimits(no MaxMessageBytes) = %v", err)
	}
}

// flood is an OpenAI-compatible upstream that answers without end: a
// stream of content chunks (stream requests) or a body of 64 MiB of
// content, until its writes fail. It counts the bytes it got out.
func flood(t *testing.T, sent *atomic.Int64, ended chan<- struct{}) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() { ended <- struct{}{} }()
		b, _ := io.ReadAll(r.Body)
		chunk := []byte(fmt.Sprintf("data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":%q}}]}\n\n", strings.Repeat("y", 4000)))
		if !strings.Contains(string(b), `"stream":true`) {
			w.Header().Set("Content-Type", "application/json")
			chunk = []byte(strings.Repeat("y", 4096))
			if _, err := w.Write([]byte(`{"choices":[{"message":{"content":"`)); err != nil {
				return
			}
		}
		for sent.Load() < 64<<20 {
			n, err := w.Write(chunk)
			sent.Add(int64(n))
			if err != nil {
				return
			}
			w.(http.Flusher).Flush()
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestProviderAnswerBounded: a provider that answers more than
// MaxAnswerBytes fails the run with a clear error at once (not at the
// agent's time limit), and is not read further: what the run holds
// stays bounded.
func TestProviderAnswerBounded(t *testing.T) {
	for _, stream := range []bool{true, false} {
		t.Run(fmt.Sprint("stream=", stream), func(t *testing.T) {
			var sent atomic.Int64
			ended := make(chan struct{}, 1)
			f := newFake()
			f.add("big", gateway.ProviderOpenAICompat, flood(t, &sent, ended), ``, func(a *gateway.Agent, _ *gateway.Provider) { a.TimeoutSeconds = 20 })
			rt := newRuntime(t, f)
			if err := rt.SetLimits(Limits{MaxMessageBytes: 1 << 20, MaxAnswerBytes: 256 << 10}); err != nil {
				t.Fatal(err)
			}
			var onDelta func(string) error
			var got atomic.Int64
			if stream {
				onDelta = func(d string) error { got.Add(int64(len(d))); return nil }
			}
			start := time.Now()
			_, err := rt.Turn(context.Background(), gateway.Principal{Trusted: true}, TurnRequest{Agent: "big", Messages: []Message{{Role: "user", Content: "talk"}}, OnDelta: onDelta})
			var pe *ProviderError
			if !errors.As(err, &pe) || pe.Detail != "answer larger than 262144 bytes" {
				t.Fatalf("Turn = %v, want a *ProviderError naming the bound", err)
			}
			if d := time.Since(start); d > 10*time.Second {
				t.Errorf("Turn failed after %v, want at once", d)
			}
			select {
			case <-ended: // the upstream's writes failed: the gateway stopped reading
			case <-time.After(10 * time.Second):
				t.Fatal("the upstream was still being read")
			}
			if n := sent.Load(); n > 32<<20 {
				t.Errorf("the upstream sent %d bytes, want the read stopped near the bound", n)
			}
			if n := got.Load(); n > 256<<10 {
				t.Errorf("%d bytes of deltas passed on, want at most the bound", n)
			}
			if tr := f.lastTrace(t); tr.Status != gateway.RunFailed || !strings.Contains(tr.Error, "answer larger than") {
				t.Errorf("trace = %q %q", tr.Status, tr.Error)
			}
		})
	}
}
