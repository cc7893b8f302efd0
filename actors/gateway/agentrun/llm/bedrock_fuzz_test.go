package llm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"

	smithyes "github.com/aws/smithy-go/eventstream"

	"gatehouse/actors/gateway/agentrun/llm/llmtest"
)

func BenchmarkBedrockConverse(b *testing.B)       { benchBedrock(b, false) }
func BenchmarkBedrockConverseStream(b *testing.B) { benchBedrock(b, true) }

// benchBedrock runs a 50-word answer through the stub (signature check
// and all), whole or streamed.
func benchBedrock(b *testing.B, stream bool) {
	stub := llmtest.NewBedrock(b)
	stub.Default = &llmtest.Reply{Text: strings.Repeat("word ", 50)}
	c, err := New(Config{Type: "bedrock", APIBase: stub.URL, Key: stub.Key(), Settings: json.RawMessage(`{"region":"us-east-1"}`)})
	if err != nil {
		b.Fatal(err)
	}
	req := Request{Model: "m", Messages: []Message{{Role: "user", Content: "x"}}}
	var on OnDelta
	if stream {
		on = func(string) error { return nil }
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.Complete(context.Background(), req, on); err != nil {
			b.Fatal(err)
		}
	}
}

// FuzzBedrockFrames feeds arbitrary bytes through the frame watcher
// (bedrockFrameBody) into the event-stream decoder the SDK uses: never a
// panic, never a frame longer than the bound decoded. The client's
// whole path over such bodies is TestBedrockMalformed's (fuzzing it
// through HTTP and the SDK stalls under -fuzz's coverage build).
func FuzzBedrockFrames(f *testing.F) {
	start := bedrockFrame(f, "event", "messageStart", `{"role":"assistant"}`)
	delta := bedrockFrame(f, "event", "contentBlockDelta", `{"contentBlockIndex":0,"delta":{"text":"hi"}}`)
	exc := bedrockFrame(f, "exception", "", `{"message":"x"}`)
	f.Add(append(append([]byte{}, start...), delta...), 64)
	f.Add(append(append([]byte{}, start...), exc...), 40)
	f.Add([]byte{0, 0, 0, 16, 0, 0, 0, 0, 1, 2, 3, 4}, 1000)
	f.Add([]byte{0xff, 0xff, 0xff, 0xff}, 100)
	f.Add([]byte{}, 0)
	f.Fuzz(func(t *testing.T, body []byte, limit int) {
		limit = max(min(limit, 1<<16), 16)
		fb := &bedrockFrameBody{ReadCloser: io.NopCloser(bytes.NewReader(body)), max: int64(limit), maxAnswer: limit}
		dec := smithyes.NewDecoder()
		for range 1000 {
			m, err := dec.Decode(fb, nil)
			if err != nil {
				var e *Error
				if errors.As(err, &e) && e.Kind != KindMalformed {
					t.Fatalf("frame bound error = %v", e)
				}
				return
			}
			if n := len(m.Payload); n > limit {
				t.Fatalf("decoded a %d-byte payload past the %d bound", n, limit)
			}
		}
	})
}
