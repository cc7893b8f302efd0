package llm

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"

	"gatehouse/actors/gateway/agentrun/llm/llmtest"
)

func TestBedrockErrorStatuses(t *testing.T) {
	tests := []struct {
		name                          string
		reply                         llmtest.Reply
		status                        int
		typ                           string
		retryable, keyRejected, rated bool
		retryAfter                    time.Duration
	}{
		{"throttled", llmtest.Reply{Status: 429, ErrorMessage: "Too many requests", Headers: map[string]string{"Retry-After": "7"}}, 429, "ThrottlingException", true, false, true, 7 * time.Second},
		{"model not ready", llmtest.Reply{Status: 429, ErrorType: "ModelNotReadyException"}, 429, "ModelNotReadyException", true, false, true, 0},
		{"internal", llmtest.Reply{Status: 500}, 500, "InternalServerException", true, false, false, 0},
		{"unavailable", llmtest.Reply{Status: 503, ErrorMessage: "overloaded"}, 503, "ServiceUnavailableException", true, false, false, 0},
		{"validation", llmtest.Reply{Status: 400, ErrorMessage: "bad model"}, 400, "ValidationException", false, false, false, 0},
		{"access denied", llmtest.Reply{Status: 403}, 403, "AccessDeniedException", false, true, false, 0},
		{"unauthorized", llmtest.Reply{Status: 401, ErrorType: "UnrecognizedClientException"}, 401, "UnrecognizedClientException", false, true, false, 0},
	}
	for _, tt := range tests {
		for _, stream := range []bool{false, true} {
			t.Run(tt.name+map[bool]string{false: "", true: "/stream"}[stream], func(t *testing.T) {
				stub := llmtest.NewBedrock(t)
				stub.Push(tt.reply)
				c := newBedrockClient(t, stub, nil)
				_, _, err := bedrockComplete(context.Background(), c, Request{Model: "m", Messages: []Message{{Role: "user", Content: "x"}}}, stream)
				var e *Error
				if !errors.As(err, &e) {
					t.Fatalf("Complete error = %v, want *Error", err)
				}
				if e.Kind != KindStatus || e.Status != tt.status || e.Type != tt.typ || e.RetryAfter != tt.retryAfter {
					t.Errorf("error = %+v, want status %d type %s retry-after %v", e, tt.status, tt.typ, tt.retryAfter)
				}
				if e.Retryable() != tt.retryable || e.KeyRejected() != tt.keyRejected || e.RateLimited() != tt.rated {
					t.Errorf("Retryable, KeyRejected, RateLimited = %v %v %v, want %v %v %v", e.Retryable(), e.KeyRejected(), e.RateLimited(), tt.retryable, tt.keyRejected, tt.rated)
				}
				if tt.reply.ErrorMessage != "" && e.Message != tt.reply.ErrorMessage {
					t.Errorf("Message = %q, want %q", e.Message, tt.reply.ErrorMessage)
				}
			})
		}
	}
}

func TestBedrockCredentials(t *testing.T) {
	stub := llmtest.NewBedrock(t)
	stub.AddKey("ASIATEMPORARY", "tempsecret/+x", "session-token-1")
	tests := []struct {
		name, key string
		typ       string // "" : success
	}{
		{"static key", llmtest.BedrockKey(llmtest.BedrockAccessKey, llmtest.BedrockSecret, ""), ""},
		{"session token", llmtest.BedrockKey("ASIATEMPORARY", "tempsecret/+x", "session-token-1"), ""},
		{"wrong secret", llmtest.BedrockKey(llmtest.BedrockAccessKey, "not-the-secret", ""), "InvalidSignatureException"},
		{"missing session token", llmtest.BedrockKey("ASIATEMPORARY", "tempsecret/+x", ""), "UnrecognizedClientException"},
		{"unknown key", llmtest.BedrockKey("AKIDUNKNOWN", "x", ""), "UnrecognizedClientException"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newBedrockClient(t, stub, func(cfg *Config) { cfg.Key = tt.key })
			for _, stream := range []bool{false, true} {
				_, _, err := bedrockComplete(context.Background(), c, Request{Model: "m", Messages: []Message{{Role: "user", Content: "x"}}}, stream)
				verr := c.Verify(context.Background())
				if tt.typ == "" {
					if err != nil || verr != nil {
						t.Fatalf("Complete, Verify = %v, %v, want success", err, verr)
					}
					continue
				}
				for _, err := range []error{err, verr} {
					var e *Error
					if !errors.As(err, &e) || e.Status != 403 || e.Type != tt.typ || !e.KeyRejected() {
						t.Errorf("error = %v, want 403 %s", err, tt.typ)
					}
					if strings.Contains(err.Error(), "not-the-secret") || strings.Contains(err.Error(), "tempsecret") {
						t.Errorf("error %q holds the secret", err)
					}
				}
			}
		})
	}
}

func TestBedrockStreamError(t *testing.T) {
	for _, typ := range []string{"ThrottlingException", "ModelStreamErrorException", "ValidationException"} {
		t.Run(typ, func(t *testing.T) {
			stub := llmtest.NewBedrock(t)
			stub.Push(llmtest.Reply{Text: "one two three four", StreamErrorAfter: 2, ErrorType: typ, ErrorMessage: "boom"})
			c := newBedrockClient(t, stub, nil)
			r, deltas, err := bedrockComplete(context.Background(), c, Request{Model: "m", Messages: []Message{{Role: "user", Content: "x"}}}, true)
			var e *Error
			if !errors.As(err, &e) || e.Kind != KindStream || e.Type != typ || e.Message != "boom" {
				t.Fatalf("Complete = %+v, %v; want a %s stream error", r, err, typ)
			}
			if want := typ != "ValidationException"; e.Retryable() != want {
				t.Errorf("Retryable() = %v, want %v", e.Retryable(), want)
			}
			if len(deltas) != 2 {
				t.Errorf("deltas = %q, want the two before the error", deltas)
			}
		})
	}
}

func TestBedrockCancel(t *testing.T) {
	stub := llmtest.NewBedrock(t)
	c := newBedrockClient(t, stub, nil)
	req := Request{Model: "m", Messages: []Message{{Role: "user", Content: "x"}}}

	stub.Push(llmtest.Reply{Text: "first second", Hang: true})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	start := time.Now()
	_, err := c.Complete(ctx, req, func(string) error { time.AfterFunc(20*time.Millisecond, cancel); return nil })
	if !errors.Is(err, context.Canceled) || time.Since(start) > 2*time.Second {
		t.Errorf("streamed Complete after cancel = %v in %v, want context.Canceled at once", err, time.Since(start))
	}

	stub.Push(llmtest.Reply{Hang: true})
	ctx3, cancel3 := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel3()
	if _, err := c.Complete(ctx3, req, func(string) error { return nil }); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("streamed Complete of a silent stream past its deadline = %v, want context.DeadlineExceeded", err)
	}

	stub.Push(llmtest.Reply{Hang: true})
	ctx2, cancel2 := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel2()
	if _, err := c.Complete(ctx2, req, nil); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Complete past its deadline = %v, want context.DeadlineExceeded", err)
	}
}

func TestBedrockOnDeltaError(t *testing.T) {
	stub := llmtest.NewBedrock(t)
	stub.Push(llmtest.Reply{Text: "a b c"})
	c := newBedrockClient(t, stub, nil)
	stop := errors.New("client left")
	_, err := c.Complete(context.Background(), Request{Model: "m", Messages: []Message{{Role: "user", Content: "x"}}}, func(string) error { return stop })
	if !errors.Is(err, stop) {
		t.Errorf("Complete = %v, want onDelta's error", err)
	}
}

// bedrockFrame is one event-stream frame, for malformed-stream cases.
func bedrockFrame(t testing.TB, msgType, eventType string, payload string) []byte {
	t.Helper()
	h := eventstream.Headers{{Name: ":message-type", Value: eventstream.StringValue(msgType)}}
	if eventType != "" {
		h = append(h, eventstream.Header{Name: ":event-type", Value: eventstream.StringValue(eventType)})
	}
	h = append(h, eventstream.Header{Name: ":content-type", Value: eventstream.StringValue("application/json")})
	var buf bytes.Buffer
	if err := eventstream.NewEncoder().Encode(&buf, eventstream.Message{Headers: h, Payload: []byte(payload)}); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestBedrockMalformed(t *testing.T) {
	start := bedrockFrame(t, "event", "messageStart", `{"role":"assistant"}`)
	delta := bedrockFrame(t, "event", "contentBlockDelta", `{"contentBlockIndex":0,"delta":{"text":"hi"}}`)
	badCRC := append([]byte(nil), delta...)
	badCRC[len(badCRC)-1] ^= 0xff
	huge := []byte{0x10, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}
	tests := []struct {
		name   string
		stream bool
		raw    string
	}{
		{"not json", false, "<html>oops</html>"},
		{"no output", false, `{"stopReason":"end_turn"}`},
		{"truncated json", false, `{"output":{"message":{"role":"assistant","content":[{"text":"hi"`},
		{"bad crc", true, string(start) + string(badCRC)},
		{"truncated frame", true, string(start) + string(delta[:len(delta)-5])},
		{"no messageStop", true, string(start) + string(delta)},
		{"garbage", true, "this is not an event stream at all, not even close"},
		{"unknown message type", true, string(start) + string(bedrockFrame(t, "weird", "", `{}`))},
		{"bad event json", true, string(start) + string(bedrockFrame(t, "event", "contentBlockDelta", `{"delta":`))},
		{"tool delta without start", true, string(start) + string(bedrockFrame(t, "event", "contentBlockDelta", `{"contentBlockIndex":3,"delta":{"toolUse":{"input":"{}"}}}`))},
		{"huge frame", true, string(start) + string(huge)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stub := llmtest.NewBedrock(t)
			stub.Push(llmtest.Reply{Raw: tt.raw})
			c := newBedrockClient(t, stub, nil)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_, _, err := bedrockComplete(ctx, c, Request{Model: "m", Messages: []Message{{Role: "user", Content: "x"}}}, tt.stream)
			var e *Error
			if !errors.As(err, &e) || e.Kind != KindMalformed {
				t.Errorf("Complete = %v, want a malformed *Error", err)
			}
		})
	}
}

func TestBedrockTooLarge(t *testing.T) {
	for _, stream := range []bool{false, true} {
		stub := llmtest.NewBedrock(t)
		stub.Push(llmtest.Reply{Text: strings.Repeat("word ", 40)})
		c := newBedrockClient(t, stub, func(cfg *Config) { cfg.MaxAnswer = 50 })
		var n int
		var on OnDelta
		if stream {
			on = func(s string) error { n += len(s); return nil }
		}
		_, err := c.Complete(context.Background(), Request{Model: "m", Messages: []Message{{Role: "user", Content: "x"}}}, on)
		var e *Error
		if !errors.As(err, &e) || e.Kind != KindMalformed || !strings.Contains(e.Message, "larger than 50") {
			t.Errorf("stream=%v: Complete = %v, want TooLarge", stream, err)
		}
		if n > 50 {
			t.Errorf("stream=%v: %d bytes passed on, want at most 50", stream, n)
		}
	}
}

func TestBedrockUnreachable(t *testing.T) {
	stub := llmtest.NewBedrock(t)
	c := newBedrockClient(t, stub, nil)
	stub.Close()
	_, err := c.Complete(context.Background(), Request{Model: "m", Messages: []Message{{Role: "user", Content: "x"}}}, nil)
	var e *Error
	if !errors.As(err, &e) || e.Kind != KindUnreachable || !e.Retryable() {
		t.Errorf("Complete = %v, want unreachable", err)
	}
}
