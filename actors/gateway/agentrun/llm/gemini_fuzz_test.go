package llm

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"testing"
)

// gemReadStream runs the stream reader and answer assembly over data, as
// Complete does over a body.
func gemReadStream(data []byte, maxAnswer int) (Result, error) {
	sse := newGemSSE(bytes.NewReader(data), int(BodyLimit(maxAnswer)), maxAnswer)
	ans := &gemAnswer{max: maxAnswer}
	for {
		ev, err := sse.next()
		if errors.Is(err, io.EOF) {
			if ans.finish == "" && ans.blocked == "" {
				return Result{}, Malformed("ended early")
			}
			return ans.result()
		}
		if err != nil {
			return Result{}, err
		}
		var r gemResponse
		if err := json.Unmarshal(ev, &r); err != nil {
			return Result{}, Malformed("bad chunk")
		}
		if err := ans.add(&r, func(string) error { return nil }); err != nil {
			return Result{}, err
		}
	}
}

func FuzzGeminiStream(f *testing.F) {
	f.Add([]byte("data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"Hi\"}],\"role\":\"model\"},\"index\":0}]}\r\n\r\n" +
		"data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\" there\"}],\"role\":\"model\"},\"finishReason\":\"STOP\"}],\"usageMetadata\":{\"promptTokenCount\":3,\"candidatesTokenCount\":2}}\r\n\r\n"))
	f.Add([]byte("data: {\"candidates\":[{\"content\":{\"parts\":[{\"functionCall\":{\"name\":\"f\",\"args\":{\"a\":1}},\"thoughtSignature\":\"c2ln\"}],\"role\":\"model\"},\"finishReason\":\"STOP\"}]}\n\n"))
	f.Add([]byte("data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"hm\",\"thought\":true}]}}]}\n\ndata: {\"error\":{\"code\":500,\"status\":\"INTERNAL\"}}\n\n"))
	f.Add([]byte("data: {\"promptFeedback\":{\"blockReason\":\"SAFETY\"}}\r\n\r\n"))
	f.Add([]byte("{\n  \"error\": {\n    \"code\": 503,\n    \"status\": \"UNAVAILABLE\"\n  }\n}\n"))
	f.Add([]byte(": comment\nevent: x\ndata: {\"candidates\":\ndata: []}\n\n"))
	f.Add([]byte("data: {\"candidates\":[{\"content\":{\"parts\":[{\"functionCall\":{\"name\":\"f\",\"args\":null}}]},\"finishReason\":\"MALFORMED_FUNCTION_CALL\"}]}"))
	f.Fuzz(func(t *testing.T, data []byte) {
		res, err := gemReadStream(data, 256)
		if err != nil {
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("error %v (%T) is not an *Error", err, err)
			}
			return
		}
		// Generated call ids and signature prefixes are not the provider's.
		if n := AnswerSize(&res); n > 256+len(res.ToolCalls)*29+len(res.Thinking)*len(GeminiSignaturePrefix) {
			t.Fatalf("answer of %d bytes passed a bound of 256", n)
		}
		for _, c := range res.ToolCalls {
			if !json.Valid([]byte(c.Function.Arguments)) {
				t.Fatalf("tool call arguments %q are not JSON", c.Function.Arguments)
			}
		}
		if res.FinishReason == "" {
			t.Fatal("no finish reason")
		}
	})
}

func FuzzGeminiSchema(f *testing.F) {
	f.Add([]byte(`{"type":"object","properties":{"a":{"type":["string","null"]},"b":{"$ref":"#/$defs/b"}},"required":["a","z"],"$defs":{"b":{"$ref":"#/$defs/b"}}}`))
	f.Add([]byte(`{"properties":{"x":{"items":{"oneOf":[{"const":1},{"enum":["a"]}]}}}}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, data []byte) {
		out, err := gemSchema(data)
		if err != nil {
			return
		}
		if _, err := json.Marshal(out); err != nil {
			t.Fatalf("converted schema does not encode: %v", err)
		}
	})
}
