package runtime

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"net/http"
	"strings"
	"time"

	"gatehouse/actors/gateway"
)

// Provider clients. openai_compat uses net/http rather than fasthttp: a
// streamed response body is read incrementally with bufio, and cancelling
// the request's context (client gone, agent time limit) aborts the
// upstream exchange at once, which fasthttp's client cannot do mid-body.
// Provider calls are few next to the key proxy, so the cost is immaterial.

// llmRequest is one completion asked of a provider.
type llmRequest struct {
	Model    string
	Messages []Message
	Tools    []toolSpec
}

// llmCall runs one completion; onDelta, when not nil, gets each piece of
// content as the provider produces it and may stop the call by returning
// an error.
type llmCall func(ctx context.Context, req llmRequest, onDelta func(string) error) (Result, error)

// llmClients holds the shared HTTP transport for openai_compat providers.
type llmClients struct {
	http *http.Client
}

// Upstream pool. The gateway bounds nothing per provider: its calls in
// flight to one provider are its chat requests in flight, bounded only by
// the listeners' connections (server.max_conns). A connection is kept
// idle for reuse up to maxIdlePerHost per provider host (maxIdle in all),
// so that up to that many calls in flight never open a new connection in
// steady state; a burst beyond it opens more and closes the surplus when
// it ends. Idle connections close after idleTimeout.
const (
	maxIdlePerHost = 256
	maxIdle        = 1024
	idleTimeout    = 90 * time.Second
)

// An answer's body is drained up to drainBytes, for at most drainTime,
// after its normal end (a streamed [DONE], a whole answer decoded) before
// it is closed: net/http reuses a connection only when its body was read
// to the end, and a provider's chunked terminator often arrives just
// after [DONE]. A failed or cancelled call closes at once.
const (
	drainBytes = 64 << 10
	drainTime  = 50 * time.Millisecond
)

func newLLMClients() *llmClients {
	tr := &http.Transport{
		Proxy:               nil,
		MaxIdleConns:        maxIdle,
		MaxIdleConnsPerHost: maxIdlePerHost,
		IdleConnTimeout:     idleTimeout,
		ForceAttemptHTTP2:   false,
	}
	return &llmClients{http: &http.Client{Transport: tr}}
}

// drain reads what is left of body, up to drainBytes and drainTime (the
// request's context, which cancel ends, aborts the read), so that the
// connection goes back to the pool. Nothing is drained once ctx is done.
func drain(ctx context.Context, cancel context.CancelFunc, body io.Reader) {
	if ctx.Err() != nil {
		return
	}
	t := time.AfterFunc(drainTime, cancel)
	defer t.Stop()
	_, _ = io.CopyN(io.Discard, body, drainBytes)
}

func (c *llmClients) close() { c.http.CloseIdleConnections() }

// forProvider returns the call for p; key is its opened credential,
// maxAnswer the bound of one answer (Limits.MaxAnswerBytes).
func (c *llmClients) forProvider(p gateway.Provider, key string, maxAnswer int) llmCall {
	if p.ProviderType == gateway.ProviderEcho {
		return echoCall(p.Settings)
	}
	return func(ctx context.Context, req llmRequest, onDelta func(string) error) (Result, error) {
		return c.openAICompat(ctx, p.APIBase, key, req, maxAnswer, onDelta)
	}
}

// tooLarge is the failure of an answer past maxAnswer bytes.
func tooLarge(maxAnswer int) error {
	return providerError(fmt.Sprintf("answer larger than %d bytes", maxAnswer))
}

// answerSize is what res holds against the bound: content, tool names
// and arguments.
func answerSize(content string, calls []ToolCall) int {
	n := len(content)
	for _, c := range calls {
		n += len(c.ID) + len(c.Function.Name) + len(c.Function.Arguments)
	}
	return n
}

// echoCall is the offline provider: it answers "echo: " and the last user
// message, one word per delta, after settings.delay_ms (default 10) each.
// Tokens are words: deterministic, for demos and tests only.
func echoCall(settings json.RawMessage) llmCall {
	delay := 10 * time.Millisecond
	var st struct {
		DelayMs *int `json:"delay_ms"`
	}
	if json.Unmarshal(settings, &st) == nil && st.DelayMs != nil && *st.DelayMs >= 0 {
		delay = time.Duration(*st.DelayMs) * time.Millisecond
	}
	return func(ctx context.Context, req llmRequest, onDelta func(string) error) (Result, error) {
		last := ""
		var prompt int64
		for _, m := range req.Messages {
			prompt += countWords(m.Content) // no slice of every word: a large message costs no memory
			if m.Role == "user" || m.Role == "tool" {
				last = m.Content
			}
		}
		if tc, ok := echoToolCall(req); ok {
			return Result{ToolCalls: []ToolCall{tc}, PromptTokens: prompt, CompletionTokens: 1, FinishReason: "tool_calls"}, nil
		}
		out := strings.Builder{}
		t := time.NewTimer(delay)
		defer t.Stop()
		words := int64(0)
		for w := range echoWords(last) {
			t.Reset(delay)
			select {
			case <-ctx.Done():
				return Result{}, ctx.Err()
			case <-t.C:
			}
			if words > 0 {
				w = " " + w
			}
			words++
			out.WriteString(w)
			if onDelta != nil {
				if err := onDelta(w); err != nil {
					return Result{}, err
				}
			}
		}
		return Result{Content: out.String(), PromptTokens: prompt, CompletionTokens: words, FinishReason: "stop"}, nil
	}
}

// echoWords yields "echo:" and then the words of s.
func echoWords(s string) iter.Seq[string] {
	return func(yield func(string) bool) {
		if !yield("echo:") {
			return
		}
		for w := range strings.FieldsSeq(s) {
			if !yield(w) {
				return
			}
		}
	}
}

// countWords is len(strings.Fields(s)) without the slice.
func countWords(s string) int64 {
	var n int64
	for range strings.FieldsSeq(s) {
		n++
	}
	return n
}

// echoToolCall is the echo provider's tool convention, for offline demos
// and tests: a last user message "/tool <name> <JSON arguments>" naming
// one of the run's tools is answered with that call; the tool's result
// is then echoed like a user message.
func echoToolCall(req llmRequest) (ToolCall, bool) {
	if len(req.Messages) == 0 {
		return ToolCall{}, false
	}
	m := req.Messages[len(req.Messages)-1]
	rest, ok := strings.CutPrefix(m.Content, "/tool ")
	if m.Role != "user" || !ok {
		return ToolCall{}, false
	}
	name, args, _ := strings.Cut(strings.TrimSpace(rest), " ")
	if args = strings.TrimSpace(args); args == "" {
		args = "{}"
	}
	for _, t := range req.Tools {
		if t.Function.Name == name {
			return ToolCall{ID: "call_" + spanID(), Type: "function", Function: ToolFunction{Name: name, Arguments: args}}, true
		}
	}
	return ToolCall{}, false
}

type oaRequest struct {
	Model         string          `json:"model"`
	Messages      []Message       `json:"messages"`
	Tools         []toolSpec      `json:"tools,omitempty"`
	Stream        bool            `json:"stream,omitempty"`
	StreamOptions *oaStreamOption `json:"stream_options,omitempty"`
}

type oaStreamOption struct {
	IncludeUsage bool `json:"include_usage"`
}

type oaUsage struct {
	PromptTokens     int64 `json:"prompt_tokens"`
	CompletionTokens int64 `json:"completion_tokens"`
}

type oaResponse struct {
	Choices []struct {
		Message struct {
			Content   string     `json:"content"`
			ToolCalls []ToolCall `json:"tool_calls"`
		} `json:"message"`
		Delta struct {
			Content   string        `json:"content"`
			ToolCalls []oaToolDelta `json:"tool_calls"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *oaUsage `json:"usage"`
}

// oaToolDelta is a piece of a streamed tool call: the first piece of call
// index carries its id and name, the others more of its arguments.
type oaToolDelta struct {
	Index    int    `json:"index"`
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

// openAICompat calls POST {base}/chat/completions, streaming upstream only
// when the client streams.
// The answer is bounded by maxAnswer bytes (Limits.MaxAnswerBytes).
func (c *llmClients) openAICompat(ctx context.Context, base, key string, req llmRequest, maxAnswer int, onDelta func(string) error) (Result, error) {
	body := oaRequest{Model: req.Model, Messages: req.Messages, Tools: req.Tools}
	if onDelta != nil {
		body.Stream, body.StreamOptions = true, &oaStreamOption{IncludeUsage: true}
	}
	b, _ := json.Marshal(body)
	rctx, cancel := context.WithCancel(ctx) // cancel also bounds the drain
	defer cancel()
	hreq, err := http.NewRequestWithContext(rctx, http.MethodPost, base+"/chat/completions", bytes.NewReader(b))
	if err != nil {
		return Result{}, providerError("bad api_base")
	}
	hreq.Header.Set("Content-Type", "application/json")
	if key != "" {
		hreq.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := c.http.Do(hreq)
	if err != nil {
		if ctx.Err() != nil {
			return Result{}, ctx.Err()
		}
		return Result{}, providerError("unreachable")
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		return Result{}, providerError(fmt.Sprintf("status %d", resp.StatusCode))
	}
	var res Result
	if onDelta == nil {
		res, err = readAnswer(ctx, resp.Body, maxAnswer)
	} else {
		res, err = readSSE(ctx, resp.Body, maxAnswer, onDelta)
	}
	if err == nil {
		drain(rctx, cancel, resp.Body)
	}
	return res, err
}

// readAnswer decodes a whole (non-streaming) answer: a body of at most
// 2×maxAnswer+64 KiB, whose content and tool calls hold at most
// maxAnswer bytes.
func readAnswer(ctx context.Context, body io.Reader, maxAnswer int) (Result, error) {
	limit := 2*int64(maxAnswer) + 64<<10
	b, err := io.ReadAll(io.LimitReader(body, limit+1))
	switch {
	case ctx.Err() != nil:
		return Result{}, ctx.Err()
	case err != nil:
		return Result{}, providerError("answer broken")
	case int64(len(b)) > limit:
		return Result{}, tooLarge(maxAnswer)
	}
	var out oaResponse
	if err := json.Unmarshal(b, &out); err != nil || len(out.Choices) == 0 {
		return Result{}, providerError("malformed answer")
	}
	res := Result{Content: out.Choices[0].Message.Content, ToolCalls: out.Choices[0].Message.ToolCalls, FinishReason: "stop"}
	if answerSize(res.Content, res.ToolCalls) > maxAnswer {
		return Result{}, tooLarge(maxAnswer)
	}
	if fr := out.Choices[0].FinishReason; fr != nil {
		res.FinishReason = *fr
	}
	if out.Usage != nil {
		res.PromptTokens, res.CompletionTokens = out.Usage.PromptTokens, out.Usage.CompletionTokens
	}
	return res, nil
}

// readSSE parses an OpenAI chat-completion stream, passing each content
// delta on as it arrives. It stops reading, and fails, once the content
// and tool calls hold more than maxAnswer bytes: what it keeps is
// bounded, whatever the provider sends.
func readSSE(ctx context.Context, body io.Reader, maxAnswer int, onDelta func(string) error) (Result, error) {
	res := Result{FinishReason: "stop"}
	var content strings.Builder
	var calls []ToolCall
	var args []strings.Builder // calls' arguments, joined at the end (not O(n²))
	size := 0                  // content and tool calls so far
	done := func() Result {
		for i := range calls {
			calls[i].Function.Arguments = args[i].String()
		}
		res.Content, res.ToolCalls = content.String(), calls
		return res
	}
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Bytes()
		if !bytes.HasPrefix(line, []byte("data:")) {
			continue
		}
		data := bytes.TrimSpace(line[5:])
		if string(data) == "[DONE]" {
			return done(), nil
		}
		var ch oaResponse
		if err := json.Unmarshal(data, &ch); err != nil {
			return Result{}, providerError("malformed stream chunk")
		}
		if ch.Usage != nil {
			res.PromptTokens, res.CompletionTokens = ch.Usage.PromptTokens, ch.Usage.CompletionTokens
		}
		for _, c := range ch.Choices {
			if c.FinishReason != nil {
				res.FinishReason = *c.FinishReason
			}
			for _, d := range c.Delta.ToolCalls {
				if d.Index < 0 || d.Index > 64 {
					return Result{}, providerError("malformed tool call")
				}
				for len(calls) <= d.Index {
					calls, args = append(calls, ToolCall{Type: "function"}), append(args, strings.Builder{})
				}
				tc := &calls[d.Index]
				if d.ID != "" {
					tc.ID = d.ID
				}
				tc.Function.Name += d.Function.Name
				args[d.Index].WriteString(d.Function.Arguments)
				size += len(d.ID) + len(d.Function.Name) + len(d.Function.Arguments)
			}
			if size += len(c.Delta.Content); size > maxAnswer {
				return Result{}, tooLarge(maxAnswer)
			}
			if c.Delta.Content == "" {
				continue
			}
			content.WriteString(c.Delta.Content)
			if err := onDelta(c.Delta.Content); err != nil {
				return Result{}, err
			}
		}
	}
	if ctx.Err() != nil {
		return Result{}, ctx.Err()
	}
	if err := sc.Err(); err != nil && !errors.Is(err, io.EOF) {
		return Result{}, providerError("stream broken")
	}
	return done(), nil // a stream that ends without [DONE]
}
