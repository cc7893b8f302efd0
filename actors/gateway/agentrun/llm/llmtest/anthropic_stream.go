package llmtest

// The Anthropic stub's streamed answer, as
// https://docs.anthropic.com/en/api/messages-streaming shows it: named SSE
// events (event: and data: lines), message_start, a ping, each content
// block's start, deltas and stop, message_delta with the stop reason and
// the output usage, message_stop; or an error event mid-way.

import (
	"encoding/json"
	"fmt"
	"net/http"
	"unicode/utf8"
)

// anthropicSSE writes one named event and flushes it; false once the client left.
type anthropicSSE struct {
	w http.ResponseWriter
	r *http.Request
}

func (s anthropicSSE) send(event string, data any) bool {
	b, _ := json.Marshal(data)
	_, err := fmt.Fprintf(s.w, "event: %s\ndata: %s\n\n", event, b)
	if f, ok := s.w.(http.Flusher); ok {
		f.Flush()
	}
	return err == nil && s.r.Context().Err() == nil
}

// block sends one content block: its start, its deltas, its stop.
func (s anthropicSSE) block(i int, start map[string]any, deltas []map[string]any) bool {
	if !s.send("content_block_start", map[string]any{"type": "content_block_start", "index": i, "content_block": start}) {
		return false
	}
	for _, d := range deltas {
		if !s.send("content_block_delta", map[string]any{"type": "content_block_delta", "index": i, "delta": d}) {
			return false
		}
	}
	return s.send("content_block_stop", map[string]any{"type": "content_block_stop", "index": i})
}

// stream answers rep as SSE.
func (a *Anthropic) stream(w http.ResponseWriter, r *http.Request, req AnthropicRequest, rep Reply) {
	w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	s := anthropicSSE{w: w, r: r}
	u := UsageOf(rep)
	start := anthropicUsage(u)
	start["output_tokens"] = 1
	if !s.send("message_start", map[string]any{"type": "message_start", "message": map[string]any{
		"id": fmt.Sprintf("msg_stub%d", a.next()), "type": "message", "role": "assistant", "model": req.Model,
		"content": []any{}, "stop_reason": nil, "stop_sequence": nil, "usage": start,
	}}) {
		return
	}
	if !s.send("ping", map[string]string{"type": "ping"}) {
		return
	}
	i := 0
	for _, b := range a.anthropicBlocks(req, rep) {
		var ok bool
		switch b["type"] {
		case "thinking":
			var deltas []map[string]any
			for _, w := range Words(b["thinking"].(string)) {
				deltas = append(deltas, map[string]any{"type": "thinking_delta", "thinking": w})
			}
			deltas = append(deltas, map[string]any{"type": "signature_delta", "signature": b["signature"]})
			ok = s.block(i, map[string]any{"type": "thinking", "thinking": "", "signature": ""}, deltas)
		case "text":
			ok = a.streamText(s, i, rep)
		default: // tool_use: its input in two pieces, after an empty one
			args := string(b["input"].(json.RawMessage))
			half := len(args) / 2
			for half > 0 && !utf8.RuneStart(args[half]) {
				half--
			}
			ok = s.block(i, map[string]any{"type": "tool_use", "id": b["id"], "name": b["name"], "input": map[string]any{}}, []map[string]any{
				{"type": "input_json_delta", "partial_json": ""},
				{"type": "input_json_delta", "partial_json": args[:half]},
				{"type": "input_json_delta", "partial_json": args[half:]},
			})
		}
		if !ok {
			return
		}
		i++
	}
	if rep.Text == "" && (rep.Hang || rep.StreamErrorAfter > 0) {
		a.streamText(s, i, rep) // hang or fail with no text
		return
	}
	if !s.send("message_delta", map[string]any{"type": "message_delta",
		"delta": map[string]any{"stop_reason": anthropicStop(rep), "stop_sequence": nil},
		"usage": map[string]int64{"output_tokens": u.Completion}}) {
		return
	}
	s.send("message_stop", map[string]string{"type": "message_stop"})
}

// streamText sends the text block word by word; with StreamErrorAfter it
// sends that many words and then an error event, with Hang the first word
// and then waits for the client to leave. False when the stream ends here.
func (a *Anthropic) streamText(s anthropicSSE, i int, rep Reply) bool {
	if !s.send("content_block_start", map[string]any{"type": "content_block_start", "index": i,
		"content_block": map[string]any{"type": "text", "text": ""}}) {
		return false
	}
	for n, w := range Words(rep.Text) {
		if rep.StreamErrorAfter > 0 && n == rep.StreamErrorAfter {
			break
		}
		if !s.send("content_block_delta", map[string]any{"type": "content_block_delta", "index": i,
			"delta": map[string]any{"type": "text_delta", "text": w}}) {
			return false
		}
		if rep.Hang {
			<-s.r.Context().Done()
			return false
		}
	}
	if rep.Hang {
		<-s.r.Context().Done()
		return false
	}
	if rep.StreamErrorAfter > 0 {
		typ, msg := rep.ErrorType, rep.ErrorMessage
		if typ == "" {
			typ = "overloaded_error"
		}
		if msg == "" {
			msg = "Overloaded"
		}
		s.send("error", map[string]any{"type": "error", "error": map[string]string{"type": typ, "message": msg}})
		return false
	}
	return s.send("content_block_stop", map[string]any{"type": "content_block_stop", "index": i})
}
