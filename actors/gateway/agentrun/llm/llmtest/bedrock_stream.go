package llmtest

import (
	"bytes"
	"encoding/json"
	"net/http"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"
)

// bedrockPad is the "p" field real Bedrock adds to every event (padding
// against length side channels); clients must ignore it.
const bedrockPad = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMN"

// bedrockFrames writes ConverseStream events in AWS event-stream framing.
type bedrockFrames struct {
	w   http.ResponseWriter
	enc *eventstream.Encoder
	err error
}

// event writes one :message-type event frame of type typ with the JSON
// payload v (plus the "p" padding).
func (f *bedrockFrames) event(typ string, v map[string]any) {
	v["p"] = bedrockPad
	f.frame(eventstream.Headers{
		{Name: ":event-type", Value: eventstream.StringValue(typ)},
		{Name: ":content-type", Value: eventstream.StringValue("application/json")},
		{Name: ":message-type", Value: eventstream.StringValue("event")},
	}, v)
}

// exception writes a :message-type exception frame: :exception-type is
// the stream union's member name (throttlingException, …).
func (f *bedrockFrames) exception(typ, msg string) {
	if typ == "" {
		typ = "ModelStreamErrorException"
	}
	r := []rune(typ)
	r[0] = unicode.ToLower(r[0])
	if msg == "" {
		msg = "error in stream"
	}
	f.frame(eventstream.Headers{
		{Name: ":exception-type", Value: eventstream.StringValue(string(r))},
		{Name: ":content-type", Value: eventstream.StringValue("application/json")},
		{Name: ":message-type", Value: eventstream.StringValue("exception")},
	}, map[string]any{"message": msg})
}

func (f *bedrockFrames) frame(h eventstream.Headers, v any) {
	if f.err != nil {
		return
	}
	p, _ := json.Marshal(v)
	var buf bytes.Buffer
	if f.err = f.enc.Encode(&buf, eventstream.Message{Headers: h, Payload: p}); f.err != nil {
		return
	}
	if _, f.err = f.w.Write(buf.Bytes()); f.err == nil {
		if fl, ok := f.w.(http.Flusher); ok {
			fl.Flush()
		}
	}
}

// stream answers a ConverseStream request with rep: messageStart; a
// reasoning block (text deltas, then its signature); the text, a delta
// per word; each tool call (contentBlockStart with its id and name, its
// input in two pieces); messageStop; metadata with the usage. An
// exception frame replaces the rest after StreamErrorAfter deltas; Hang
// waits after the first delta until the client leaves.
func (b *Bedrock) stream(w http.ResponseWriter, r *http.Request, rep Reply) {
	for k, v := range rep.Headers {
		w.Header().Set(k, v)
	}
	w.Header().Set("Content-Type", "application/vnd.amazon.eventstream")
	w.Header().Set("X-Amzn-RequestId", "00000000-0000-0000-0000-000000000000")
	w.WriteHeader(200)
	f := &bedrockFrames{w: w, enc: eventstream.NewEncoder()}
	ids, sig := b.callIDs(rep)
	f.event("messageStart", map[string]any{"role": "assistant"})
	if rep.Hang && rep.Text == "" {
		bedrockHang(r)
		return
	}
	idx := 0
	if rep.Thinking != "" {
		for _, word := range Words(rep.Thinking) {
			f.event("contentBlockDelta", map[string]any{"contentBlockIndex": idx, "delta": map[string]any{"reasoningContent": map[string]string{"text": word}}})
		}
		f.event("contentBlockDelta", map[string]any{"contentBlockIndex": idx, "delta": map[string]any{"reasoningContent": map[string]string{"signature": sig}}})
		f.event("contentBlockStop", map[string]any{"contentBlockIndex": idx})
		idx++
	}
	if words := Words(rep.Text); len(words) > 0 || rep.StreamErrorAfter > 0 {
		for i, word := range words {
			if rep.StreamErrorAfter > 0 && i == rep.StreamErrorAfter {
				break
			}
			f.event("contentBlockDelta", map[string]any{"contentBlockIndex": idx, "delta": map[string]string{"text": word}})
			if rep.Hang && i == 0 {
				bedrockHang(r)
				return
			}
		}
		if rep.StreamErrorAfter > 0 {
			f.exception(rep.ErrorType, rep.ErrorMessage)
			return
		}
		f.event("contentBlockStop", map[string]any{"contentBlockIndex": idx})
		idx++
	}
	for i, c := range rep.ToolCalls {
		f.event("contentBlockStart", map[string]any{"contentBlockIndex": idx, "start": map[string]any{"toolUse": map[string]string{"toolUseId": ids[i], "name": c.Name}}})
		in := string(bedrockInput(c.Args))
		half := len(in) / 2
		for half > 0 && !utf8.RuneStart(in[half]) {
			half--
		}
		for _, piece := range []string{in[:half], in[half:]} {
			f.event("contentBlockDelta", map[string]any{"contentBlockIndex": idx, "delta": map[string]any{"toolUse": map[string]string{"input": piece}}})
		}
		f.event("contentBlockStop", map[string]any{"contentBlockIndex": idx})
		idx++
	}
	f.event("messageStop", map[string]any{"stopReason": bedrockStop(rep)})
	f.event("metadata", map[string]any{"usage": bedrockUsage(UsageOf(rep)), "metrics": map[string]int{"latencyMs": 42}})
}

// bedrockHang waits until the client leaves (or a minute passes).
func bedrockHang(r *http.Request) {
	select {
	case <-r.Context().Done():
	case <-time.After(time.Minute):
	}
}
