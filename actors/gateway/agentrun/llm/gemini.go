// The gemini_native provider type (alias gemini): Google's Gemini API as
// its REST reference documents it (https://ai.google.dev/api):
// POST {base}/v1beta/models/{model}:generateContent, the same with
// :streamGenerateContent?alt=sse for a stream, GET {base}/v1beta/models,
// the key in x-goog-api-key. Wire shapes and conversion are in
// gemini_wire.go, tool schemas in gemini_schema.go, SSE in gemini_sse.go.
//
// No SDK: google.golang.org/genai v1.77.0 buffers one stream event up to
// 256 MiB, drops an error answer's headers (Retry-After), logs through the
// global log package on every failed or cancelled stream, and round-trips
// requests and answers through map[string]any (443 allocs for a small
// answer, 2411 for a 21-chunk stream, against 121 and 434 here, same
// loopback server); the wire is small, so this client speaks it itself.
//
// Quirks handled here: the API refuses a bad key with 400 INVALID_ARGUMENT
// (reason API_KEY_INVALID), reported as 401 so a key pool sets the key
// aside; Gemini names no tool call, so ids are "call_" + 24 hex digits and
// results find their function's name through the assistant call's id;
// thought signatures travel in Result.Thinking and go back on the parts
// they came on (Gemini 3 refuses function calls without them).
package llm

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
)

// GeminiDefaultBase is gemini_native's api_base when none is given.
const GeminiDefaultBase = "https://generativelanguage.googleapis.com"

func init() {
	Register(TypeInfo{
		Name:        "gemini_native",
		DefaultBase: GeminiDefaultBase,
		NeedsKey:    true,
		New:         newGemini,
		Validate: func(apiBase string, settings json.RawMessage) error {
			if err := gemCheckBase(apiBase); err != nil {
				return err
			}
			_, err := gemSettings(settings)
			return err
		},
	}, "gemini")
}

// geminiSettings are the settings gemini_native reads.
type geminiSettings struct {
	// MaxTokens is generationConfig.maxOutputTokens when the request
	// gives none (0: the model's default).
	MaxTokens int
	// ThinkingBudget is thinkingConfig.thinkingBudget (-1 dynamic, 0
	// off); nil leaves it to the model.
	ThinkingBudget *int
	// IncludeThoughts asks for thought summaries (kept in
	// Result.Thinking, never shown to clients).
	IncludeThoughts bool
}

func gemSettings(raw json.RawMessage) (geminiSettings, error) {
	var s geminiSettings
	if len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null" {
		return s, nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return s, errors.New("settings: must be a JSON object")
	}
	if v, ok := m["max_tokens"]; ok {
		if err := json.Unmarshal(v, &s.MaxTokens); err != nil || s.MaxTokens < 1 {
			return s, errors.New("settings.max_tokens: must be a positive integer")
		}
	}
	if v, ok := m["thinking_budget_tokens"]; ok {
		var b int
		if err := json.Unmarshal(v, &b); err != nil || b < -1 {
			return s, errors.New("settings.thinking_budget_tokens: must be an integer >= -1 (-1 dynamic, 0 off)")
		}
		s.ThinkingBudget = &b
	}
	if v, ok := m["include_thoughts"]; ok {
		if err := json.Unmarshal(v, &s.IncludeThoughts); err != nil {
			return s, errors.New("settings.include_thoughts: must be a boolean")
		}
	}
	return s, nil
}

// generationConfig is the request's generationConfig, nil when it would
// be empty; maxTokens (the request's) wins over settings.max_tokens.
func (s geminiSettings) generationConfig(maxTokens int) *gemGenConfig {
	g := gemGenConfig{MaxOutputTokens: s.MaxTokens}
	if maxTokens > 0 {
		g.MaxOutputTokens = maxTokens
	}
	if s.ThinkingBudget != nil || s.IncludeThoughts {
		g.ThinkingConfig = &gemThinkConfig{ThinkingBudget: s.ThinkingBudget, IncludeThoughts: s.IncludeThoughts}
	}
	if g == (gemGenConfig{}) {
		return nil
	}
	return &g
}

func gemCheckBase(base string) error {
	if base == "" {
		return nil
	}
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return errors.New("api_base: must be an http or https URL")
	}
	return nil
}

// gemini is the gemini_native client.
type gemini struct {
	base      string
	key       string
	http      *http.Client
	maxAnswer int
	settings  geminiSettings
}

func newGemini(cfg Config) (Client, error) {
	if err := gemCheckBase(cfg.APIBase); err != nil {
		return nil, err
	}
	s, err := gemSettings(cfg.Settings)
	if err != nil {
		return nil, err
	}
	// A base given with the version ("…/v1beta") would double it.
	base := strings.TrimSuffix(strings.TrimRight(cfg.APIBase, "/"), "/v1beta")
	return &gemini{
		base:      base,
		key:       cfg.Key,
		http:      cfg.HTTP,
		maxAnswer: cfg.MaxAnswer,
		settings:  s,
	}, nil
}

// Complete implements Client.
func (g *gemini) Complete(ctx context.Context, req Request, onDelta OnDelta) (Result, error) {
	body, err := gemBuild(req, g.settings)
	if err != nil {
		return Result{}, &Error{Kind: KindStatus, Status: http.StatusBadRequest, Type: "INVALID_ARGUMENT", Message: Clip("gemini: " + err.Error())}
	}
	b, err := json.Marshal(body)
	if err != nil {
		return Result{}, &Error{Kind: KindStatus, Status: http.StatusBadRequest, Type: "INVALID_ARGUMENT", Message: "gemini: request cannot be encoded"}
	}
	model := url.PathEscape(strings.TrimPrefix(req.Model, "models/"))
	path := "/v1beta/models/" + model + ":generateContent"
	if onDelta != nil {
		path = "/v1beta/models/" + model + ":streamGenerateContent?alt=sse"
	}
	resp, err := g.do(ctx, http.MethodPost, path, b)
	if err != nil {
		return Result{}, err
	}
	ans := &gemAnswer{max: g.maxAnswer}
	if onDelta == nil {
		err = g.whole(ctx, resp.Body, ans)
	} else {
		err = g.stream(ctx, resp.Body, ans, onDelta)
	}
	if err != nil {
		// Closed, not drained: the rest of a failed answer may never come.
		_ = resp.Body.Close()
		if ctx.Err() != nil {
			return Result{}, ctx.Err()
		}
		return Result{}, err
	}
	gemDrain(resp.Body)
	return ans.result()
}

// whole reads a generateContent answer.
func (g *gemini) whole(ctx context.Context, body io.Reader, ans *gemAnswer) error {
	var r gemResponse
	if err := g.readJSON(ctx, body, &r); err != nil {
		return err
	}
	if r.Error != nil { // an error shape with a 2xx status
		return &Error{Kind: KindStatus, Status: max(r.Error.Code, 0), Type: r.Error.Status, Message: Clip(r.Error.Message), RetryAfter: r.Error.retryAfter()}
	}
	return ans.add(&r, nil)
}

// stream reads a streamGenerateContent answer event by event; it must end
// with a chunk carrying finishReason (or a blocked prompt's feedback).
func (g *gemini) stream(ctx context.Context, body io.Reader, ans *gemAnswer, onDelta OnDelta) error {
	sse := newGemSSE(body, int(BodyLimit(g.maxAnswer)), g.maxAnswer)
	for {
		data, err := sse.next()
		if errors.Is(err, io.EOF) {
			if ans.finish == "" && ans.blocked == "" {
				return Malformed("gemini: stream ended before its last chunk")
			}
			return nil
		}
		if err != nil {
			var e *Error
			if errors.As(err, &e) {
				return e
			}
			return Unreachable(ctx, err)
		}
		var r gemResponse
		if err := json.Unmarshal(data, &r); err != nil {
			return Malformed("gemini: stream chunk is not a GenerateContentResponse")
		}
		if err := ans.add(&r, onDelta); err != nil {
			return err
		}
	}
}

// do sends one request; a non-2xx answer becomes an *Error, no answer
// Unreachable.
func (g *gemini) do(ctx context.Context, method, path string, body []byte) (*http.Response, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, g.base+path, rd)
	if err != nil {
		return nil, &Error{Kind: KindUnreachable, Message: "gemini: bad request URL"}
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if g.key != "" {
		req.Header.Set("x-goog-api-key", g.key)
	}
	resp, err := g.http.Do(req)
	if err != nil {
		return nil, Unreachable(ctx, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		e := gemStatusError(resp)
		_ = resp.Body.Close()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, e
	}
	return resp, nil
}

// gemStatusError is StatusError, with the API's refusal of a bad key
// (400, ErrorInfo reason API_KEY_INVALID) reported as 401.
func gemStatusError(resp *http.Response) *Error {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	cp := *resp
	cp.Body = io.NopCloser(bytes.NewReader(b))
	e := StatusError(&cp)
	if e.Status == http.StatusBadRequest && bytes.Contains(b, []byte(`"API_KEY_INVALID"`)) {
		e.Status = http.StatusUnauthorized
	}
	return e
}

// readJSON decodes a whole body of at most BodyLimit bytes into v.
func (g *gemini) readJSON(ctx context.Context, body io.Reader, v any) error {
	limit := BodyLimit(g.maxAnswer)
	b, err := io.ReadAll(io.LimitReader(body, limit+1))
	if err != nil {
		return Unreachable(ctx, err)
	}
	if int64(len(b)) > limit {
		return TooLarge(g.maxAnswer)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return Malformed("gemini: answer is not valid JSON")
	}
	return nil
}

// gemDrain reads what is left of a body (up to 64 KiB) so the connection
// can be reused, then closes it.
func gemDrain(body io.ReadCloser) {
	_, _ = io.CopyN(io.Discard, body, 64<<10)
	_ = body.Close()
}

// gemMaxModelPages bounds how many pages of the model list are read.
const gemMaxModelPages = 20

// Models implements Client: GET /v1beta/models, every page, the models
// that support generateContent ("models/x" listed as "x").
func (g *gemini) Models(ctx context.Context) ([]Model, error) {
	var out []Model
	token := ""
	for range gemMaxModelPages {
		q := url.Values{"pageSize": {"1000"}}
		if token != "" {
			q.Set("pageToken", token)
		}
		page, err := g.modelPage(ctx, q)
		if err != nil {
			return nil, err
		}
		for _, m := range page.Models {
			if len(m.Methods) > 0 && !slices.Contains(m.Methods, "generateContent") {
				continue
			}
			out = append(out, Model{ID: strings.TrimPrefix(m.Name, "models/"), DisplayName: m.DisplayName})
		}
		if token = page.NextPageToken; token == "" {
			break
		}
	}
	return out, nil
}

// Verify implements Client: one page of one model.
func (g *gemini) Verify(ctx context.Context) error {
	_, err := g.modelPage(ctx, url.Values{"pageSize": {"1"}})
	return err
}

type gemModelPage struct {
	Models []struct {
		Name        string   `json:"name"`
		DisplayName string   `json:"displayName"`
		Methods     []string `json:"supportedGenerationMethods"`
	} `json:"models"`
	NextPageToken string `json:"nextPageToken"`
}

func (g *gemini) modelPage(ctx context.Context, q url.Values) (*gemModelPage, error) {
	resp, err := g.do(ctx, http.MethodGet, "/v1beta/models?"+q.Encode(), nil)
	if err != nil {
		return nil, err
	}
	var page gemModelPage
	err = g.readJSON(ctx, resp.Body, &page)
	_ = resp.Body.Close()
	if err != nil {
		return nil, err
	}
	return &page, nil
}

// gemCallID is a tool call id for a call Gemini names without one.
func gemCallID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return "call_" + hex.EncodeToString(b[:])
}

var _ Client = (*gemini)(nil)
