// anthropic_native (alias anthropic): Anthropic's Messages API, POST
// {api_base}/v1/messages, whole or streamed (SSE), and GET /v1/models,
// following https://docs.anthropic.com/en/api/messages and
// .../api/messages-streaming. Prompt caching (cache_control on the system
// prompt and the last tool) is on unless settings.prompt_caching is false;
// settings.thinking_budget_tokens turns extended thinking on.
//
// It uses the official SDK (github.com/anthropics/anthropic-sdk-go/v2) for
// the request types, the JSON and the SSE decoding. Around it, this file
// keeps what the SDK does its own way: the key goes as x-api-key (the
// SDK's WithAPIKey sends Authorization: Bearer) with anthropic-version
// 2023-06-01 (the SDK sends a newer one); a middleware turns every non-2xx
// answer into an *Error from at most 64 KiB of its body (the SDK reads an
// error body whole) and bounds a stream's events and total size (its SSE
// decoder buffers an event of any size); retries and the SDK's own
// OpenTelemetry spans are off. Its cost is size: the two services used
// add about 15 MB to cmd/gatehouse (54 → 69 MB; anthropic.NewClient, which
// links every service, added 32 MB), since text/template's MethodByName
// keeps every exported method of every type the binary can reach.
package llm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
)

// anthropicVersion is the anthropic-version header the client sends.
const anthropicVersion = "2023-06-01"

// anthropicMinBudget is the smallest thinking budget the API accepts.
const anthropicMinBudget = 1024

// anthropicWholeTimeout bounds a non-streamed call: the SDK refuses one
// with a large max_tokens unless a timeout is given, and the API's own
// limit for a non-streamed answer is about an hour. The caller's ctx
// bounds it further.
const anthropicWholeTimeout = time.Hour

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
	messages  anthropic.MessageService
	models    anthropic.ModelService
	whole     *http.Client // cfg.HTTP with its bodies bounded
	stream    *http.Client // cfg.HTTP; the middleware bounds the events
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
	c := &anthropicClient{
		whole:     LimitedHTTP(cfg.HTTP, BodyLimit(cfg.MaxAnswer), cfg.MaxAnswer),
		stream:    cfg.HTTP,
		maxAnswer: cfg.MaxAnswer,
		set:       set,
	}
	// The two services, not anthropic.NewClient: a Client links every
	// service of the API (files, skills, organizations, beta...), which
	// adds tens of megabytes to the binary.
	opts := []option.RequestOption{
		option.WithBaseURL(cfg.APIBase), // services read no ANTHROPIC_* variables
		option.WithHeader("x-api-key", cfg.Key),
		option.WithHeader("anthropic-version", anthropicVersion),
		option.WithMaxRetries(0),
		option.WithoutOpenTelemetry(),
		option.WithHTTPClient(c.whole),
	}
	c.messages = anthropic.NewMessageService(opts...)
	c.models = anthropic.NewModelService(opts...)
	return c, nil
}

// anthropicCall is one call's view of its HTTP exchange, kept by the
// middleware: whether an answer came, and a stream's bounded body.
type anthropicCall struct {
	answered bool
	readErr  error // the first error reading a 2xx answer's body, EOF aside
	stream   bool
	body     *anthSSEBound
	max      int // the client's MaxAnswer
}

// anthWatch records the first error reading a body, so that a decoding
// error (malformed) is told from a broken connection (unreachable).
type anthWatch struct {
	io.ReadCloser
	st *anthropicCall
}

func (w anthWatch) Read(p []byte) (int, error) {
	n, err := w.ReadCloser.Read(p)
	if err != nil && !errors.Is(err, io.EOF) && w.st.readErr == nil {
		w.st.readErr = err
	}
	return n, err
}

// middleware turns a non-2xx answer into an *Error (read from at most
// 64 KiB of its body, Retry-After included) and bounds a stream's body.
func (st *anthropicCall) middleware(req *http.Request, next option.MiddlewareNext) (*http.Response, error) {
	resp, err := next(req)
	if err != nil {
		return nil, err
	}
	st.answered = true
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		e := StatusError(resp)
		_ = resp.Body.Close()
		return nil, e
	}
	resp.Body = anthWatch{ReadCloser: resp.Body, st: st}
	if st.stream {
		// An event holds at most one delta, which may be the whole
		// answer; the whole stream has room for many small deltas, each
		// with its event's framing.
		lim := BodyLimit(st.max)
		st.body = &anthSSEBound{r: resp.Body, event: lim, eventLeft: lim, totalLeft: 64 * lim, maxAnswer: st.max}
		resp.Body = st.body
	}
	return resp, nil
}

// Complete implements Client.
func (c *anthropicClient) Complete(ctx context.Context, req Request, onDelta OnDelta) (Result, error) {
	params, opts := c.params(req)
	st := &anthropicCall{stream: onDelta != nil, max: c.maxAnswer}
	opts = append(opts, option.WithMiddleware(st.middleware))
	if onDelta == nil {
		opts = append(opts, option.WithRequestTimeout(anthropicWholeTimeout))
		msg, err := c.messages.New(ctx, params, opts...)
		if err != nil {
			return Result{}, anthropicFail(ctx, err, st)
		}
		return anthropicWhole(msg, c.maxAnswer)
	}
	rctx, cancel := context.WithCancel(ctx) // cancel also bounds the drain
	defer cancel()
	opts = append(opts, option.WithHTTPClient(c.stream))
	s := c.messages.NewStreaming(rctx, params, opts...)
	defer func() { _ = s.Close() }()
	res, err := readAnthropicStream(s, c.maxAnswer, onDelta)
	if err != nil {
		var de anthropicDeltaError
		if errors.As(err, &de) {
			return Result{}, de.err
		}
		return Result{}, anthropicFail(ctx, err, st)
	}
	if st.body != nil {
		drainAnthropic(rctx, cancel, st.body)
	}
	return res, nil
}

// anthropicFail maps an error of the SDK's call: ctx's error once ctx is
// done, an *Error as it is (a status, a bound, a stream's error event), an
// answer that came whole but did not decode as Malformed, anything else
// (no answer, a body cut short) as unreachable.
func anthropicFail(ctx context.Context, err error, st *anthropicCall) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	var ae *anthropic.Error
	if errors.As(err, &ae) { // an error event mid-stream
		return StreamError(ErrorBody([]byte(ae.RawJSON())))
	}
	if st.answered && st.readErr == nil {
		return Malformed("anthropic: unreadable answer")
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

// Models implements Client: GET /v1/models, every page (at most 20).
func (c *anthropicClient) Models(ctx context.Context) ([]Model, error) {
	var out []Model
	params := anthropic.ModelListParams{Limit: anthropic.Int(1000)}
	for range 20 {
		st := &anthropicCall{}
		page, err := c.models.List(ctx, params, option.WithMiddleware(st.middleware))
		if err != nil {
			return nil, anthropicFail(ctx, err, st)
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
		params.AfterID = anthropic.String(page.LastID)
	}
	return out, nil
}

// Verify implements Client: the first model of the list, which needs a
// valid key and costs nothing.
func (c *anthropicClient) Verify(ctx context.Context) error {
	st := &anthropicCall{}
	_, err := c.models.List(ctx, anthropic.ModelListParams{Limit: anthropic.Int(1)}, option.WithMiddleware(st.middleware))
	if err != nil {
		return anthropicFail(ctx, err, st)
	}
	return nil
}
