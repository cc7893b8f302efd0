package runtime

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
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
}

// llmCall runs one completion; onDelta, when not nil, gets each piece of
// content as the provider produces it and may stop the call by returning
// an error.
type llmCall func(ctx context.Context, req llmRequest, onDelta func(string) error) (Result, error)

// llmClients holds the shared HTTP transport for openai_compat providers.
type llmClients struct {
	http *http.Client
}

func newLLMClients() *llmClients {
	tr := &http.Transport{
		Proxy:               nil,
		MaxIdleConnsPerHost: 16,
		IdleConnTimeout:     90 * time.Second,
		ForceAttemptHTTP2:   false,
	}
	return &llmClients{http: &http.Client{Transport: tr}}
}

func (c *llmClients) close() { c.http.CloseIdleConnections() }

// forProvider returns the call for p; key is its opened credential.
func (c *llmClients) forProvider(p gateway.Provider, key string) llmCall {
	if p.ProviderType == gateway.ProviderEcho {
		return echoCall(p.Settings)
	}
	return func(ctx context.Context, req llmRequest, onDelta func(string) error) (Result, error) {
		return c.openAICompat(ctx, p.APIBase, key, req, onDelta)
	}
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
			prompt += int64(len(strings.Fields(m.Content)))
			if m.Role == "user" {
				last = m.Content
			}
		}
		words := append([]string{"echo:"}, strings.Fields(last)...)
		var out strings.Builder
		t := time.NewTimer(delay)
		defer t.Stop()
		for i, w := range words {
			t.Reset(delay)
			select {
			case <-ctx.Done():
				return Result{}, ctx.Err()
			case <-t.C:
			}
			if i > 0 {
				w = " " + w
			}
			out.WriteString(w)
			if onDelta != nil {
				if err := onDelta(w); err != nil {
					return Result{}, err
				}
			}
		}
		return Result{Content: out.String(), PromptTokens: prompt, CompletionTokens: int64(len(words)), FinishReason: "stop"}, nil
	}
}

type oaRequest struct {
	Model         string          `json:"model"`
	Messages      []Message       `json:"messages"`
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
			Content string `json:"content"`
		} `json:"message"`
		Delta struct {
			Content string `json:"content"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *oaUsage `json:"usage"`
}

// openAICompat calls POST {base}/chat/completions, streaming upstream only
// when the client streams.
func (c *llmClients) openAICompat(ctx context.Context, base, key string, req llmRequest, onDelta func(string) error) (Result, error) {
	body := oaRequest{Model: req.Model, Messages: req.Messages}
	if onDelta != nil {
		body.Stream, body.StreamOptions = true, &oaStreamOption{IncludeUsage: true}
	}
	b, _ := json.Marshal(body)
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/chat/completions", bytes.NewReader(b))
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
	if onDelta == nil {
		var out oaResponse
		if err := json.NewDecoder(io.LimitReader(resp.Body, 16<<20)).Decode(&out); err != nil || len(out.Choices) == 0 {
			if ctx.Err() != nil {
				return Result{}, ctx.Err()
			}
			return Result{}, providerError("malformed answer")
		}
		res := Result{Content: out.Choices[0].Message.Content, FinishReason: "stop"}
		if fr := out.Choices[0].FinishReason; fr != nil {
			res.FinishReason = *fr
		}
		if out.Usage != nil {
			res.PromptTokens, res.CompletionTokens = out.Usage.PromptTokens, out.Usage.CompletionTokens
		}
		return res, nil
	}
	return readSSE(ctx, resp.Body, onDelta)
}

// readSSE parses an OpenAI chat-completion stream, passing each content
// delta on as it arrives.
func readSSE(ctx context.Context, body io.Reader, onDelta func(string) error) (Result, error) {
	res := Result{FinishReason: "stop"}
	var content strings.Builder
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Bytes()
		if !bytes.HasPrefix(line, []byte("data:")) {
			continue
		}
		data := bytes.TrimSpace(line[5:])
		if string(data) == "[DONE]" {
			res.Content = content.String()
			return res, nil
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
	res.Content = content.String() // a stream that ends without [DONE]
	return res, nil
}
