// Ollama's /api/chat wire types: the request built from a Request, and
// the answer, whole or as an NDJSON stream (one JSON object a line, the
// last with done: true and the token counts), read into a Result.

package llm

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"strings"
)

type ollamaRequest struct {
	Model    string          `json:"model"`
	Messages []ollamaMessage `json:"messages"`
	Tools    []ToolSpec      `json:"tools,omitempty"`
	// Stream is always sent: Ollama streams when it is absent.
	Stream  bool           `json:"stream"`
	Options *ollamaOptions `json:"options,omitempty"`
}

type ollamaOptions struct {
	NumPredict int `json:"num_predict,omitempty"`
	NumCtx     int `json:"num_ctx,omitempty"`
}

type ollamaMessage struct {
	Role      string       `json:"role"`
	Content   string       `json:"content"`
	Thinking  string       `json:"thinking,omitempty"`
	ToolCalls []ollamaCall `json:"tool_calls,omitempty"`
	// ToolName names the tool a "tool" message answers.
	ToolName string `json:"tool_name,omitempty"`
}

// ollamaCall is a tool call; arguments is a JSON object.
type ollamaCall struct {
	ID       string `json:"id,omitempty"`
	Function struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	} `json:"function"`
}

// ollamaMessages converts msgs: the system messages joined into one,
// first; tool calls' arguments as objects; each tool result named after
// the call it answers.
func ollamaMessages(msgs []Message) []ollamaMessage {
	out := make([]ollamaMessage, 0, len(msgs)+1)
	if sys := oaJoinSystem(msgs); sys != "" {
		out = append(out, ollamaMessage{Role: "system", Content: sys})
	}
	names := map[string]string{} // call id → tool name
	for i := range msgs {
		m := &msgs[i]
		switch m.Role {
		case "system":
			continue
		case "tool":
			out = append(out, ollamaMessage{Role: "tool", Content: m.Content, ToolName: names[m.ToolCallID]})
			continue
		}
		om := ollamaMessage{Role: m.Role, Content: m.Content}
		for _, t := range m.Thinking {
			om.Thinking += t.Text
		}
		for _, tc := range m.ToolCalls {
			names[tc.ID] = tc.Function.Name
			var c ollamaCall
			c.Function.Name, c.Function.Arguments = tc.Function.Name, ollamaArgs(tc.Function.Arguments)
			om.ToolCalls = append(om.ToolCalls, c)
		}
		out = append(out, om)
	}
	return out
}

// ollamaArgs is a call's JSON arguments string as the object Ollama
// wants: {} for none or for anything but an object.
func ollamaArgs(s string) json.RawMessage {
	b := []byte(strings.TrimSpace(s))
	if len(b) > 0 && b[0] == '{' && json.Valid(b) {
		return b
	}
	return json.RawMessage("{}")
}

// ollamaChunk is a whole answer, one line of a stream, or an error.
type ollamaChunk struct {
	Message struct {
		Content   string       `json:"content"`
		Thinking  string       `json:"thinking"`
		ToolCalls []ollamaCall `json:"tool_calls"`
	} `json:"message"`
	Done            bool            `json:"done"`
	DoneReason      string          `json:"done_reason"`
	PromptEvalCount int64           `json:"prompt_eval_count"`
	EvalCount       int64           `json:"eval_count"`
	Error           json.RawMessage `json:"error"`
}

// ollamaAnswer assembles an answer from its chunks.
type ollamaAnswer struct {
	res      Result
	content  strings.Builder
	thinking strings.Builder
	size     int
	max      int
	done     bool
}

// add adds one chunk (its text passed to onDelta when not nil).
func (a *ollamaAnswer) add(line []byte, onDelta OnDelta) error {
	var ch ollamaChunk
	if err := json.Unmarshal(line, &ch); err != nil {
		return Malformed("malformed answer")
	}
	if oaHasJSON(ch.Error) {
		typ, msg := ErrorBody(line)
		return StreamError(typ, msg)
	}
	m := &ch.Message
	a.size += len(m.Content) + len(m.Thinking)
	for _, c := range m.ToolCalls {
		args, ok := oaArgs(c.Function.Arguments)
		if !ok {
			return Malformed("malformed tool call arguments")
		}
		if len(a.res.ToolCalls) >= oaMaxCalls {
			return Malformed("too many tool calls")
		}
		id := c.ID
		if id == "" {
			id = oaCallID()
		}
		a.res.ToolCalls = append(a.res.ToolCalls, ToolCall{ID: id, Type: "function", Function: ToolFunction{Name: c.Function.Name, Arguments: args}})
		a.size += len(id) + len(c.Function.Name) + len(args)
	}
	if a.size > a.max {
		return TooLarge(a.max)
	}
	a.thinking.WriteString(m.Thinking)
	if m.Content != "" {
		a.content.WriteString(m.Content)
		if onDelta != nil {
			if err := onDelta(m.Content); err != nil {
				return err
			}
		}
	}
	if ch.Done {
		a.done = true
		a.res.PromptTokens, a.res.CompletionTokens = ch.PromptEvalCount, ch.EvalCount
		a.res.FinishReason = ch.DoneReason
	}
	return nil
}

func (a *ollamaAnswer) result() Result {
	res := a.res
	res.Content = a.content.String()
	if a.thinking.Len() > 0 {
		res.Thinking = []Thinking{{Text: a.thinking.String()}}
	}
	reason := res.FinishReason
	if reason != "length" {
		reason = "" // stop, load, unload: a finished answer
	}
	res.FinishReason = oaFinish(reason, len(res.ToolCalls) > 0)
	return res
}

// ollamaReadAnswer reads a whole ("stream": false) answer.
func ollamaReadAnswer(ctx context.Context, body io.Reader, maxAnswer int) (Result, error) {
	limit := BodyLimit(maxAnswer)
	b, err := io.ReadAll(io.LimitReader(body, limit+1))
	switch {
	case err != nil:
		return Result{}, Unreachable(ctx, err)
	case int64(len(b)) > limit:
		return Result{}, TooLarge(maxAnswer)
	}
	a := ollamaAnswer{max: maxAnswer}
	if err := a.add(b, nil); err != nil {
		return Result{}, err
	}
	if !a.done {
		return Result{}, Malformed("answer not done")
	}
	return a.result(), nil
}

// ollamaReadStream reads an NDJSON stream up to its done line, passing
// each text delta on. A line {"error": …} fails it with StreamError; a
// stream that ends before done is malformed.
func ollamaReadStream(ctx context.Context, body io.Reader, maxAnswer int, onDelta OnDelta) (Result, error) {
	a := ollamaAnswer{max: maxAnswer}
	sc := bufio.NewScanner(body)
	buf := lineBufs.Get().(*[]byte)
	defer lineBufs.Put(buf)
	sc.Buffer((*buf)[:0], oaLineLimit(maxAnswer))
	for sc.Scan() {
		line := sc.Bytes()
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		if err := a.add(line, onDelta); err != nil {
			return Result{}, err
		}
		if a.done {
			return a.result(), nil
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
	return Result{}, Malformed("stream ended early")
}
