// The Chat Completions stream: SSE `data:` lines, each a
// chat.completion.chunk, ended by `data: [DONE]`; and the drain that
// hands the connection back to the pool after it.

package llm

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"sync"
	"time"
)

// An answer's body is drained up to oaDrainBytes, for at most
// oaDrainTime, after its normal end (a streamed [DONE], a whole answer
// decoded) before it is closed: net/http reuses a connection only when
// its body was read to the end, and a provider's chunked terminator often
// arrives just after [DONE] (measured in issue 35). A failed or cancelled
// call closes at once. The time bound is wall-clock time, which a process
// starved of CPU spends waiting to be scheduled: at 50 ms a loaded
// machine (load average ~6 on 2 cores, race detector on) ran it out with
// the terminator already on its way and redialled 5-36 connections per
// 128 streamed calls; at 250 ms none in 9,000. Only a provider that
// keeps sending after [DONE] pays it.
const (
	oaDrainBytes = 64 << 10
	oaDrainTime  = 250 * time.Millisecond
)

// oaLineLimit bounds one line of a stream (one chunk): a line longer
// than a whole answer's body bound cannot hold a bounded answer.
func oaLineLimit(maxAnswer int) int { return int(min(BodyLimit(maxAnswer), 64<<20)) }

// lineBufs are the streams' line buffers (16 KiB, grown by the scanner
// only for a longer line, and then not kept): one a stream was 16 KiB of
// garbage per streamed call (issue 35).
var lineBufs = sync.Pool{New: func() any { b := make([]byte, 16<<10); return &b }}

// oaMaxCalls bounds the tool calls of one answer.
const oaMaxCalls = 64

// oaDrain reads what is left of body, up to oaDrainBytes and oaDrainTime
// (the request's context, which cancel ends, aborts the read), so that
// the connection goes back to the pool. Nothing is drained once ctx is
// done.
func oaDrain(ctx context.Context, cancel context.CancelFunc, body io.Reader) {
	if ctx.Err() != nil {
		return
	}
	t := time.AfterFunc(oaDrainTime, cancel)
	defer t.Stop()
	_, _ = io.CopyN(io.Discard, body, oaDrainBytes)
}

// oaChunk is one chat.completion.chunk, or a mid-stream error.
type oaChunk struct {
	Choices []struct {
		Index int `json:"index"`
		Delta struct {
			Content   string        `json:"content"`
			Refusal   string        `json:"refusal"`
			ToolCalls []oaToolDelta `json:"tool_calls"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *oaUsage        `json:"usage"`
	Error json.RawMessage `json:"error"`
}

// oaToolDelta is a piece of a streamed tool call: the first piece of
// call index carries its id and name, the others more of its arguments.
type oaToolDelta struct {
	Index    *int   `json:"index"`
	ID       string `json:"id"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

// oaStream assembles a streamed answer.
type oaStream struct {
	res      Result
	content  strings.Builder
	calls    []ToolCall
	args     []strings.Builder // calls' arguments, joined at the end (not O(n²))
	size     int               // content and tool calls so far
	max      int
	finished bool // a finish_reason came
}

// oaReadStream parses a Chat Completions stream, passing each content
// delta on as it arrives. It fails once the content and tool calls hold
// more than maxAnswer bytes (what it keeps is bounded, whatever the
// provider sends), on a mid-stream error chunk (StreamError), and on a
// stream that ends with neither [DONE] nor a finish_reason.
func oaReadStream(ctx context.Context, body io.Reader, maxAnswer int, onDelta OnDelta) (Result, error) {
	s := oaStream{max: maxAnswer}
	sc := bufio.NewScanner(body)
	buf := lineBufs.Get().(*[]byte)
	defer lineBufs.Put(buf) // nothing read from it outlives the call: chunks are decoded into copies
	sc.Buffer((*buf)[:0], oaLineLimit(maxAnswer))
	for sc.Scan() {
		data, ok := oaSSEData(sc.Bytes())
		if !ok {
			continue
		}
		if string(data) == "[DONE]" {
			return s.result(), nil
		}
		if err := s.chunk(data, onDelta); err != nil {
			return Result{}, err
		}
	}
	if ctx.Err() != nil {
		return Result{}, ctx.Err()
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return Result{}, TooLarge(maxAnswer)
		}
		return Result{}, Unreachable(ctx, err)
	}
	if !s.finished {
		return Result{}, Malformed("stream ended early")
	}
	return s.result(), nil // finish_reason without [DONE]: accepted
}

// oaSSEData is the payload of an SSE `data:` line (ok false for comments,
// other fields and blank lines).
func oaSSEData(line []byte) ([]byte, bool) {
	rest, ok := bytes.CutPrefix(line, []byte("data:"))
	if !ok {
		return nil, false
	}
	return bytes.TrimSpace(rest), true
}

// chunk adds one chunk to the answer.
func (s *oaStream) chunk(data []byte, onDelta OnDelta) error {
	if len(data) == 0 {
		return nil
	}
	var ch oaChunk
	if err := json.Unmarshal(data, &ch); err != nil {
		return Malformed("malformed stream chunk")
	}
	if oaHasJSON(ch.Error) {
		typ, msg := ErrorBody(data)
		return StreamError(typ, msg)
	}
	if ch.Usage != nil {
		ch.Usage.apply(&s.res)
	}
	// A chunk with no choices (Azure's prompt_filter_results first, the
	// include_usage last) carries nothing more.
	for i := range ch.Choices {
		c := &ch.Choices[i]
		if c.Index != 0 {
			continue // n is 1: other choices are not asked for
		}
		if c.FinishReason != nil && *c.FinishReason != "" {
			if *c.FinishReason == "error" {
				return StreamError("", "the provider ended the answer with an error")
			}
			s.res.FinishReason, s.finished = *c.FinishReason, true
		}
		for j := range c.Delta.ToolCalls {
			if err := s.toolDelta(&c.Delta.ToolCalls[j]); err != nil {
				return err
			}
		}
		text := c.Delta.Content
		if text == "" {
			text = c.Delta.Refusal // the model declined: its reason is the answer
		}
		if s.size += len(text); s.size > s.max {
			return TooLarge(s.max)
		}
		if text == "" {
			continue
		}
		s.content.WriteString(text)
		if err := onDelta(text); err != nil {
			return err
		}
	}
	return nil
}

// toolDelta adds a piece of a tool call. A piece without an index (some
// compatible servers) continues the last call unless it brings a new id.
func (s *oaStream) toolDelta(d *oaToolDelta) error {
	idx := len(s.calls) - 1
	switch {
	case d.Index != nil:
		idx = *d.Index
	case idx < 0 || (d.ID != "" && d.ID != s.calls[idx].ID):
		idx = len(s.calls)
	}
	if idx < 0 || idx >= oaMaxCalls {
		return Malformed("malformed tool call")
	}
	for len(s.calls) <= idx {
		s.calls, s.args = append(s.calls, ToolCall{Type: "function"}), append(s.args, strings.Builder{})
	}
	tc := &s.calls[idx]
	if d.ID != "" {
		tc.ID = d.ID
	}
	tc.Function.Name += d.Function.Name
	s.args[idx].WriteString(d.Function.Arguments)
	if s.size += len(d.ID) + len(d.Function.Name) + len(d.Function.Arguments); s.size > s.max {
		return TooLarge(s.max)
	}
	return nil
}

// result is the answer so far, tool calls completed (made-up ids where
// the provider gave none).
func (s *oaStream) result() Result {
	res := s.res
	res.Content = s.content.String()
	for i := range s.calls {
		s.calls[i].Function.Arguments = s.args[i].String()
		if s.calls[i].ID == "" {
			s.calls[i].ID = oaCallID()
		}
	}
	res.ToolCalls = s.calls
	res.FinishReason = oaFinish(res.FinishReason, len(s.calls) > 0)
	return res
}
