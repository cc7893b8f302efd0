package llmtest

import (
	"encoding/json"
	"fmt"
	"net/http"
)

// oaStubCallID is the id the stub gives call i of a reply without one.
func oaStubCallID(c Call, i int) string {
	if c.ID != "" {
		return c.ID
	}
	return fmt.Sprintf("call_stub%d", i)
}

// oaArgsOf is a call's arguments ("" : {}).
func oaArgsOf(c Call) string {
	if c.Args == "" {
		return "{}"
	}
	return c.Args
}

// whole answers rep as one chat.completion.
func (s *OpenAI) whole(w http.ResponseWriter, req *openAIRequest, rep Reply) {
	msg := map[string]any{"role": "assistant", "content": nil, "refusal": nil}
	if rep.Text != "" || len(rep.ToolCalls) == 0 {
		msg["content"] = rep.Text
	}
	finish := "stop"
	if len(rep.ToolCalls) > 0 {
		calls := make([]map[string]any, len(rep.ToolCalls))
		for i, c := range rep.ToolCalls {
			calls[i] = map[string]any{"id": oaStubCallID(c, i), "type": "function", "function": map[string]any{"name": c.Name, "arguments": oaArgsOf(c)}}
		}
		msg["tool_calls"], finish = calls, "tool_calls"
	}
	choice := map[string]any{"index": 0, "message": msg, "logprobs": nil, "finish_reason": finish}
	out := map[string]any{
		"id": "chatcmpl-stub", "object": "chat.completion", "created": 1700000000, "model": req.answerModel(),
		"system_fingerprint": "fp_stub", "choices": []any{choice}, "usage": openAIUsage(UsageOf(rep)),
	}
	if s.azure {
		choice["content_filter_results"] = azureFilterResults()
		out["prompt_filter_results"] = []any{map[string]any{"prompt_index": 0, "content_filter_results": azureFilterResults()}}
	}
	oaWriteJSON(w, 200, out)
}

// stream answers rep as chat.completion.chunk events: (Azure: the
// prompt filter chunk,) the role, the words, the tool calls in pieces,
// the finish, the usage when asked for, [DONE].
func (s *OpenAI) stream(w http.ResponseWriter, r *http.Request, req *openAIRequest, rep Reply) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(200)
	fl, _ := w.(http.Flusher)
	withUsage := req.StreamOptions != nil && req.StreamOptions.IncludeUsage
	send := func(choices []any, extra map[string]any) {
		ch := map[string]any{"id": "chatcmpl-stub", "object": "chat.completion.chunk", "created": 1700000000,
			"model": req.answerModel(), "system_fingerprint": "fp_stub", "choices": choices}
		if withUsage {
			ch["usage"] = nil
		}
		for k, v := range extra {
			ch[k] = v
		}
		b, _ := json.Marshal(ch)
		fmt.Fprintf(w, "data: %s\n\n", b)
		if fl != nil {
			fl.Flush()
		}
	}
	delta := func(d map[string]any, finish any) []any {
		return []any{map[string]any{"index": 0, "delta": d, "logprobs": nil, "finish_reason": finish}}
	}
	if s.azure { // Azure's first chunk: the prompt's filter results, no choices
		send([]any{}, map[string]any{"id": "", "model": "", "object": "", "created": 0,
			"prompt_filter_results": []any{map[string]any{"prompt_index": 0, "content_filter_results": azureFilterResults()}}})
	}
	send(delta(map[string]any{"role": "assistant", "content": "", "refusal": nil}, nil), nil)
	for i, word := range Words(rep.Text) {
		if rep.StreamErrorAfter > 0 && i == rep.StreamErrorAfter {
			break
		}
		send(delta(map[string]any{"content": word}, nil), nil)
		if rep.Hang {
			s.hang(r)
			return
		}
	}
	if rep.StreamErrorAfter > 0 {
		typ := rep.ErrorType
		if typ == "" {
			typ = "server_error"
		}
		b, _ := json.Marshal(map[string]any{"error": map[string]any{"message": rep.ErrorMessage, "type": typ, "param": nil, "code": nil}})
		fmt.Fprintf(w, "data: %s\n\n", b)
		return
	}
	if rep.Hang { // no text: hang after the role chunk
		s.hang(r)
		return
	}
	finish := "stop"
	for i, c := range rep.ToolCalls {
		finish = "tool_calls"
		args := oaArgsOf(c)
		send(delta(map[string]any{"tool_calls": []any{map[string]any{"index": i, "id": oaStubCallID(c, i), "type": "function",
			"function": map[string]any{"name": c.Name, "arguments": ""}}}}, nil), nil)
		for _, part := range []string{args[:len(args)/2], args[len(args)/2:]} {
			send(delta(map[string]any{"tool_calls": []any{map[string]any{"index": i, "function": map[string]any{"arguments": part}}}}, nil), nil)
		}
	}
	send(delta(map[string]any{}, finish), nil)
	if withUsage {
		send([]any{}, map[string]any{"usage": openAIUsage(UsageOf(rep))})
	}
	fmt.Fprint(w, "data: [DONE]\n\n")
}

// openAIUsage is u in the API's usage shape.
func openAIUsage(u Usage) map[string]any {
	return map[string]any{
		"prompt_tokens": u.Prompt, "completion_tokens": u.Completion, "total_tokens": u.Prompt + u.Completion,
		"prompt_tokens_details":     map[string]any{"cached_tokens": u.CacheRead, "audio_tokens": 0},
		"completion_tokens_details": map[string]any{"reasoning_tokens": u.Reasoning, "audio_tokens": 0},
	}
}

func azureFilterResults() map[string]any {
	safe := map[string]any{"filtered": false, "severity": "safe"}
	return map[string]any{"hate": safe, "self_harm": safe, "sexual": safe, "violence": safe}
}
