package llm

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// fuzzMaxAnswer is the bound the fuzzed parsers run with.
const fuzzMaxAnswer = 256

// oaFuzzCheck fails t unless err is nil with a bounded answer, an
// *Error, or onDelta's error.
func oaFuzzCheck(t *testing.T, res Result, err, stop error) {
	t.Helper()
	var e *Error
	switch {
	case err == nil:
		if AnswerSize(&res) > fuzzMaxAnswer+len(res.ToolCalls)*len("call_000000000000000000000000") {
			t.Fatalf("answer of %d bytes past the bound", AnswerSize(&res))
		}
		switch res.FinishReason {
		case "stop", "tool_calls", "length", "content_filter":
		default:
			t.Fatalf("FinishReason %q", res.FinishReason)
		}
	case errors.Is(err, stop):
	case !errors.As(err, &e):
		t.Fatalf("error %v (%T) is not an *Error", err, err)
	}
}

// FuzzOpenAIStream: whatever a provider sends, the Chat Completions
// stream and answer readers neither panic nor hold more than the bound,
// and fail with an *Error or onDelta's error.
func FuzzOpenAIStream(f *testing.F) {
	for _, s := range []string{
		"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"}}]}\n\ndata: [DONE]\n\n",
		"data: {\"choices\":[],\"prompt_filter_results\":[]}\n\ndata: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\"},\"finish_reason\":\"stop\"}]}\n\n",
		"data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"c\",\"function\":{\"name\":\"f\",\"arguments\":\"{\\\"a\\\"\"}}]}}]}\n\ndata: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\":1}\"}}]},\"finish_reason\":\"tool_calls\"}]}\n\ndata: [DONE]\n\n",
		"data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"function\":{\"name\":\"f\"}}]}}]}\n\n",
		"data: {\"error\":{\"message\":\"boom\",\"type\":\"server_error\"}}\n\n",
		"data: {\"choices\":[],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":2,\"prompt_tokens_details\":{\"cached_tokens\":1}}}\n\ndata: [DONE]\n\n",
		": ping\r\n\r\ndata:[DONE]\r\n",
		"data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":63}]}}]}\n\n",
		`{"choices":[{"message":{"content":"x","tool_calls":[{"function":{"name":"f","arguments":{"a":1}}}]},"finish_reason":"stop"}]}`,
		`{"error":"nope"}`,
		"data: \n\ndata: null\n\ndata: []\n\n",
	} {
		f.Add([]byte(s), false)
		f.Add([]byte(s), true)
	}
	stop := errors.New("stop")
	f.Fuzz(func(t *testing.T, data []byte, stopEarly bool) {
		n := 0
		onDelta := func(string) error {
			if n++; stopEarly && n == 2 {
				return stop
			}
			return nil
		}
		res, err := oaReadStream(context.Background(), strings.NewReader(string(data)), fuzzMaxAnswer, onDelta)
		oaFuzzCheck(t, res, err, stop)
		res, err = oaReadAnswer(context.Background(), strings.NewReader(string(data)), fuzzMaxAnswer)
		oaFuzzCheck(t, res, err, stop)
	})
}

// FuzzOllamaStream: likewise for Ollama's NDJSON stream and whole
// answer.
func FuzzOllamaStream(f *testing.F) {
	for _, s := range []string{
		"{\"message\":{\"role\":\"assistant\",\"content\":\"hi\"},\"done\":false}\n{\"message\":{\"content\":\"\"},\"done\":true,\"done_reason\":\"stop\",\"prompt_eval_count\":3,\"eval_count\":1}\n",
		"{\"message\":{\"tool_calls\":[{\"function\":{\"name\":\"f\",\"arguments\":{\"a\":[1,2]}}}]},\"done\":false}\n{\"done\":true}\n",
		"{\"message\":{\"thinking\":\"hmm\"},\"done\":false}\n\n{\"done\":true,\"done_reason\":\"length\"}",
		"{\"message\":{\"content\":\"a\"},\"done\":false}\n{\"error\":\"model crashed\"}\n",
		`{"message":{"role":"assistant","content":"whole"},"done":true,"eval_count":2}`,
		"{\"message\":{\"tool_calls\":[{\"function\":{\"name\":\"f\",\"arguments\":\"{}\"}}]},\"done\":true}",
		"{\"done\":false}\n",
	} {
		f.Add([]byte(s), false)
		f.Add([]byte(s), true)
	}
	stop := errors.New("stop")
	f.Fuzz(func(t *testing.T, data []byte, stopEarly bool) {
		n := 0
		onDelta := func(string) error {
			if n++; stopEarly && n == 2 {
				return stop
			}
			return nil
		}
		res, err := ollamaReadStream(context.Background(), strings.NewReader(string(data)), fuzzMaxAnswer, onDelta)
		oaFuzzCheck(t, res, err, stop)
		res, err = ollamaReadAnswer(context.Background(), strings.NewReader(string(data)), fuzzMaxAnswer)
		oaFuzzCheck(t, res, err, stop)
	})
}
