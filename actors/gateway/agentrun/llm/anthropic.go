// anthropic_native (alias anthropic): Anthropic's Messages API, POST
// {api_base}/v1/messages, whole or streamed (SSE), and GET /v1/models,
// following https://docs.anthropic.com/en/api/messages,
// .../api/messages-streaming, .../api/errors and .../api/models-list.
// Prompt caching (cache_control on the system prompt and the last tool) is
// on unless settings.prompt_caching is false; settings.thinking_budget_tokens
// turns extended thinking on.
//
// The wire layer is hand-written on net/http (cfg.HTTP): the JSON types of
// the fields used (anthropic_request.go, anthropic_answer.go) and a bounded
// reader of the stream's named SSE events (anthropic_sse.go). The official
// SDK (anthropic-sdk-go/v2) was used first and dropped: its messages and
// models services alone added 15 MB to cmd/gatehouse (58.4 MB without it,
// 73.3 MB with it: text/template's MethodByName keeps every exported method
// the binary can reach); it read a stream event in 3.6 µs with 24
// allocations and 2.7 KB, this reader in 1 µs with 9 and 350 B
// (BenchmarkAnthropicStream1K); and the client had to work around it in
// many places (Authorization: Bearer instead of x-api-key, a newer
// anthropic-version, an SSE decoder and error-body reads without bounds,
// ANTHROPIC_* variables, its own OpenTelemetry spans, a timeout it required
// for a large max_tokens, a warning on stderr for the thinking field).
package llm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// anthropicVersion is the anthropic-version header the client sends.
const anthropicVersion = "2023-06-01"

// anthropicMinBudget is the smallest thinking budget the API accepts.
const anthropicMinBudget = 1024

func init() {
	Register(TypeInfo{
		Name:        "anthropic_native",
		DefaultBase: "https://api.anthropic.com",
		NeedsKey:    true,
		New:         newAnthropic,
		Validate:    validateAnthropic,
	}, "anthropic")
}

// anthropicSettings is what anthropic_native reads from settings.
type anthropicSettings struct {
	MaxTokens      *int  `json:"max_tokens"`
	PromptCaching  *bool `json:"prompt_caching"`
	ThinkingBudget *int  `json:"thinking_budget_tokens"`
}

// parseAnthropicSettings decodes and checks settings; the error names the
// bad field.
func parseAnthropicSettings(raw json.RawMessage) (anthropicSettings, error) {
	var s anthropicSettings
	if len(raw) == 0 || string(raw) == "null" {
		return s, nil
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		return s, errors.New("settings must be a JSON object")
	}
	check := func(name string, dst any) error {
		v, ok := fields[name]
		if !ok || string(v) == "null" {
			return nil
		}
		if json.Unmarshal(v, dst) != nil {
			switch dst.(type) {
			case **bool:
				return fmt.Errorf("settings.%s must be a boolean", name)
			default:
				return fmt.Errorf("settings.%s must be an integer", name)
			}
		}
		return nil
	}
	if err := check("max_tokens", &s.MaxTokens); err != nil {
		return s, err
	}
	if err := check("prompt_caching", &s.PromptCaching); err != nil {
		return s, err
	}
	if err := check("thinking_budget_tokens", &s.ThinkingBudget); err != nil {
		return s, err
	}
	if s.MaxTokens != nil && *s.MaxTokens < 1 {
		return s, errors.New("settings.max_tokens must be at least 1")
	}
	if s.ThinkingBudget != nil && *s.ThinkingBudget < anthropicMinBudget {
		return s, fmt.Errorf("settings.thinking_budget_tokens must be at least %d", anthropicMinBudget)
	}
	return s, nil
}

func validateAnthropic(apiBase string, settings json.RawMessage) error {
	if apiBase != "" {
		if err := checkAnthropicBase(apiBase); err != nil {
			return err
		}
	}
	_, err := parseAnthropicSettings(settings)
	return err
}

func checkAnthropicBase(base string) error {
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return errors.New("api_base must be an http or https URL")
	}
	return nil
}

// anthropicClient is one anthropic_native provider with one key.
type anthropicClient struct {
	http      *http.Client
	base      string // api_base without a trailing slash
	key       string
	maxAnswer int
	set       anthropicSettings
}

func newAnthropic(cfg Config) (Client, error) {
	set, err := parseAnthropicSettings(cfg.Settings)
	if err != nil {
		return nil, err
	}
	if err := checkAnthropicBase(cfg.APIBase); err != nil {
		return nil, err
	}
	return &anthropicClient{
		http:      cfg.HTTP,
		base:      strings.TrimRight(cfg.APIBase, "/"),
		key:       cfg.Key,
		maxAnswer: cfg.MaxAnswer,
		set:       set,
	}, nil
}

// do sends one request to path (query included) with the key and
// anthropic-version: a 2xx answer's response (its body for the caller to
// close), an *Error of any other status (read from at most 64 KiB of its
// body), or Unreachable's error when no answer came.
func (c *anthropicClient) do(ctx context.Context, method, path string, body []byte, accept string) (*http.Response, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	hreq, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return nil, fmt.Errorf("anthropic: bad api_base: %w", err)
	}
	if body != nil {
		hreq.Header.Set("Content-Type", "application/json")
	}
	hreq.Header.Set("Accept", accept)
	hreq.Header.Set("anthropic-version", anthropicVersion)
	if c.key != "" {
		hreq.Header.Set("x-api-key", c.key)
	}
	resp, err := c.http.Do(hreq)
	if err != nil {
		return nil, Unreachable(ctx, err)
	}
	if resp.StatusCode/100 != 2 {
		e := StatusError(resp)
		_ = resp.Body.Close()
		return nil, e
	}
	return resp, nil
}

// Complete implements Client.
func (c *anthropicClient) Complete(ctx context.Context, req Request, onDelta OnDelta) (Result, error) {
	stream := onDelta != nil
	body, err := json.Marshal(c.request(req, stream))
	if err != nil {
		return Result{}, fmt.Errorf("anthropic: encode request: %w", err)
	}
	rctx, cancel := context.WithCancel(ctx) // cancel also bounds the drain
	defer cancel()
	accept := "application/json"
	if stream {
		accept = "text/event-stream"
	}
	resp, err := c.do(rctx, http.MethodPost, "/v1/messages", body, accept)
	if err != nil {
		return Result{}, anthropicFail(ctx, err)
	}
	defer func() { _ = resp.Body.Close() }()
	if !stream {
		b, err := readAnthropicBody(resp.Body, c.maxAnswer)
		if err != nil {
			return Result{}, anthropicFail(ctx, err)
		}
		return anthropicWhole(b, c.maxAnswer)
	}
	res, err := readAnthropicStream(resp.Body, c.maxAnswer, onDelta)
	if err != nil {
		var de anthropicDeltaError
		if errors.As(err, &de) {
			return Result{}, de.err
		}
		return Result{}, anthropicFail(ctx, err)
	}
	drainAnthropic(rctx, cancel, resp.Body)
	return res, nil
}

// readAnthropicBody reads a whole answer's body, at most
// BodyLimit(maxAnswer) bytes (past it: TooLarge), to its end so that the
// connection is reused.
func readAnthropicBody(body io.Reader, maxAnswer int) ([]byte, error) {
	limit := BodyLimit(maxAnswer)
	b, err := io.ReadAll(io.LimitReader(body, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, TooLarge(maxAnswer)
	}
	return b, nil
}

// anthropicFail maps a failed call's error: ctx's error once ctx is done,
// an *Error as it is (a status, a bound, a malformed answer, a stream's
// error event), anything else (a body cut short) as unreachable.
func anthropicFail(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return Unreachable(ctx, err)
}

// drainAnthropic reads what is left of a finished stream, up to 64 KiB
// and 50 ms, so that its connection goes back to the pool.
func drainAnthropic(ctx context.Context, cancel context.CancelFunc, body io.Reader) {
	if ctx.Err() != nil {
		return
	}
	t := time.AfterFunc(50*time.Millisecond, cancel)
	defer t.Stop()
	_, _ = io.CopyN(io.Discard, body, 64<<10)
}

// anthropicModelPage is one page of GET /v1/models.
type anthropicModelPage struct {
	Data []struct {
		ID          string `json:"id"`
		DisplayName string `json:"display_name"`
	} `json:"data"`
	HasMore bool   `json:"has_more"`
	LastID  string `json:"last_id"`
}

// modelPage GETs one page of the model list: limit models after afterID
// ("" : from the start).
func (c *anthropicClient) modelPage(ctx context.Context, limit int, afterID string) (anthropicModelPage, error) {
	var page anthropicModelPage
	q := url.Values{"limit": {fmt.Sprint(limit)}}
	if afterID != "" {
		q.Set("after_id", afterID)
	}
	resp, err := c.do(ctx, http.MethodGet, "/v1/models?"+q.Encode(), nil, "application/json")
	if err != nil {
		return page, anthropicFail(ctx, err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := readAnthropicBody(resp.Body, c.maxAnswer)
	if err != nil {
		return page, anthropicFail(ctx, err)
	}
	if json.Unmarshal(b, &page) != nil {
		return page, Malformed("anthropic: unreadable model list")
	}
	return page, nil
}

// Models implements Client: GET /v1/models, every page (at most 20).
func (c *anthropicClient) Models(ctx context.Context) ([]Model, error) {
	var out []Model
	after := ""
	for range 20 {
		page, err := c.modelPage(ctx, 1000, after)
		if err != nil {
			return nil, err
		}
		for _, m := range page.Data {
			if m.ID == "" {
				return nil, Malformed("anthropic: model without an id")
			}
			out = append(out, Model{ID: m.ID, DisplayName: m.DisplayName})
		}
		if !page.HasMore || page.LastID == "" {
			break
		}
		after = page.LastID
	}
	return out, nil
}

// Verify implements Client: the first model of the list, which needs a
// valid key and costs nothing.
func (c *anthropicClient) Verify(ctx context.Context) error {
	_, err := c.modelPage(ctx, 1, "")
	return err
}

var _ Client = (*anthropicClient)(nil)
