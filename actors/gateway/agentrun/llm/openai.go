// openai_compat and its presets (openai, openrouter, groq, deepseek,
// mistral, xai): OpenAI's Chat Completions API, POST {api_base}/chat/completions,
// whole or streamed (SSE with stream_options.include_usage), and GET
// {api_base}/models, following https://platform.openai.com/docs/api-reference/chat.
// A preset only fills api_base; everything else is openai_compat's. The
// same code serves azure_openai (azure.go), parameterised by URL and
// auth header.
//
// Hand-written on net/http, not github.com/openai/openai-go: this is the
// gateway's benchmarked hot chat path (issue 35 measured its pool reuse
// and the drain after [DONE]), and the SDK would add its own retries,
// buffering and a second copy of every message type for two JSON shapes.

package llm

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// oaPresets are the openai_compat presets: a name and its default base.
var oaPresets = []struct{ name, base string }{
	{"openai", "https://api.openai.com/v1"},
	{"openrouter", "https://openrouter.ai/api/v1"},
	{"groq", "https://api.groq.com/openai/v1"},
	{"deepseek", "https://api.deepseek.com/v1"},
	{"mistral", "https://api.mistral.ai/v1"},
	{"xai", "https://api.x.ai/v1"},
}

func init() {
	// openai_compat needs no key: local servers (vLLM, LM Studio,
	// llama.cpp) often have none; Authorization is sent when one is set.
	Register(TypeInfo{Name: "openai_compat", New: newOpenAICompat, Validate: validateOpenAI(true)})
	for _, p := range oaPresets {
		Register(TypeInfo{Name: p.name, DefaultBase: p.base, NeedsKey: true, New: newOpenAICompat, Validate: validateOpenAI(false)})
	}
}

// oaModelsLimit bounds a model list's body (OpenRouter's is over 1 MiB).
const oaModelsLimit = 8 << 20

// oaSettings is what openai_compat reads from settings.
type oaSettings struct {
	// MaxTokens is max_tokens when the request gives none; 0 sends none.
	MaxTokens int
}

func parseOASettings(raw json.RawMessage) (oaSettings, error) {
	f, err := oaFields(raw)
	if err != nil {
		return oaSettings{}, err
	}
	n, err := oaInt(f, "max_tokens", 1, 1<<24)
	return oaSettings{MaxTokens: n}, err
}

// validateOpenAI checks an openai_compat (base required) or preset
// (base optional) provider's api_base and settings.
func validateOpenAI(baseRequired bool) func(string, json.RawMessage) error {
	return validateBaseAnd(baseRequired, parseOASettings)
}

// validateBaseAnd checks a provider's api_base (when set, or always when
// baseRequired) and its settings with parse: the Validate of the types
// on OpenAI's and Ollama's wire.
func validateBaseAnd[S any](baseRequired bool, parse func(json.RawMessage) (S, error)) func(string, json.RawMessage) error {
	return func(apiBase string, settings json.RawMessage) error {
		if apiBase != "" || baseRequired {
			if err := oaCheckBase(apiBase); err != nil {
				return err
			}
		}
		_, err := parse(settings)
		return err
	}
}

func newOpenAICompat(cfg Config) (Client, error) {
	if err := oaCheckBase(cfg.APIBase); err != nil {
		return nil, err
	}
	st, err := parseOASettings(cfg.Settings)
	if err != nil {
		return nil, err
	}
	base := strings.TrimRight(cfg.APIBase, "/")
	c := &oaClient{
		http:        cfg.HTTP,
		route:       func(model string) (string, string) { return base + "/chat/completions", model },
		modelsURL:   base + "/models",
		streamUsage: true,
		maxTokens:   st.MaxTokens,
		maxAnswer:   cfg.MaxAnswer,
	}
	if cfg.Type == "openrouter" {
		// OpenRouter lists its models to anyone; its key endpoint is
		// the cheapest call that checks the key.
		c.verifyURL = base + "/key"
	}
	if cfg.Key != "" {
		c.authHeader, c.authValue = "Authorization", "Bearer "+cfg.Key
	}
	return c, nil
}

// oaClient calls one OpenAI-style Chat Completions endpoint.
type oaClient struct {
	http *http.Client
	// route gives a model's chat URL and the model to put in the body
	// ("" : none).
	route     func(model string) (url, bodyModel string)
	modelsURL string
	// verifyURL is what Verify GETs ("" : modelsURL).
	verifyURL string
	// authHeader and authValue carry the key ("" : none).
	authHeader, authValue string
	// streamUsage asks a stream for its usage (stream_options).
	streamUsage bool
	maxTokens   int
	maxAnswer   int
}

// Complete implements Client: one POST, streamed upstream only when
// onDelta is set.
func (c *oaClient) Complete(ctx context.Context, req Request, onDelta OnDelta) (Result, error) {
	url, model := c.route(req.Model)
	body, err := c.body(req, model, onDelta != nil)
	if err != nil {
		return Result{}, fmt.Errorf("openai: encode request: %w", err)
	}
	rctx, cancel := context.WithCancel(ctx) // cancel also bounds the drain
	defer cancel()
	hreq, err := http.NewRequestWithContext(rctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return Result{}, fmt.Errorf("openai: bad api_base: %w", err)
	}
	hreq.Header.Set("Content-Type", "application/json")
	if onDelta != nil {
		hreq.Header.Set("Accept", "text/event-stream")
	} else {
		hreq.Header.Set("Accept", "application/json")
	}
	c.auth(hreq)
	resp, err := c.http.Do(hreq)
	if err != nil {
		return Result{}, Unreachable(ctx, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return Result{}, StatusError(resp)
	}
	var res Result
	switch {
	case onDelta == nil:
		res, err = oaReadAnswer(ctx, resp.Body, c.maxAnswer)
	case strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json"):
		// A whole answer (or an error) to a streamed request: some
		// compatible servers do not stream, e.g. with tools.
		if res, err = oaReadAnswer(ctx, resp.Body, c.maxAnswer); err == nil && res.Content != "" {
			err = onDelta(res.Content)
		}
	default:
		res, err = oaReadStream(ctx, resp.Body, c.maxAnswer, onDelta)
	}
	if err != nil {
		return Result{}, err
	}
	oaDrain(rctx, cancel, resp.Body)
	return res, nil
}

// request is req as the API's body.
func (c *oaClient) request(req Request, model string, stream bool) oaRequest {
	r := oaRequest{Model: model, Messages: oaMessages(req.Messages), Tools: oaTools(req.Tools), MaxTokens: req.MaxTokens}
	if r.MaxTokens <= 0 {
		r.MaxTokens = c.maxTokens
	}
	if stream {
		r.Stream = true
		if c.streamUsage {
			r.StreamOptions = &oaStreamOptions{IncludeUsage: true}
		}
	}
	return r
}

// body is req's JSON body. With req.ToolsJSON the tools array goes in
// as it is, first, and the rest is encoded after it into the same
// buffer: {"tools":[…] then the request without tools, whose opening
// brace becomes the comma (a trailing newline is left, which JSON
// allows).
func (c *oaClient) body(req Request, model string, stream bool) ([]byte, error) {
	if req.ToolsJSON == nil || len(req.Tools) == 0 {
		return json.Marshal(c.request(req, model, stream))
	}
	req.Tools = nil // encoded already
	r := c.request(req, model, stream)
	n := len(req.ToolsJSON) + 256
	for _, m := range req.Messages {
		n += len(m.Content) + 64
	}
	var buf bytes.Buffer
	buf.Grow(n)
	buf.WriteString(`{"tools":`)
	buf.Write(req.ToolsJSON)
	brace := buf.Len()
	if err := json.NewEncoder(&buf).Encode(r); err != nil {
		return nil, err
	}
	b := buf.Bytes()
	b[brace] = ','
	return b, nil
}

func (c *oaClient) auth(r *http.Request) {
	if c.authValue != "" {
		r.Header.Set(c.authHeader, c.authValue)
	}
}

// Models implements Client: GET {base}/models, data[].id.
func (c *oaClient) Models(ctx context.Context) ([]Model, error) {
	b, err := c.get(ctx, c.modelsURL)
	if err != nil {
		return nil, err
	}
	var v struct {
		Data []struct {
			ID   string `json:"id"`
			Name string `json:"name"` // OpenRouter
		} `json:"data"`
	}
	if json.Unmarshal(b, &v) != nil {
		return nil, Malformed("malformed model list")
	}
	out := make([]Model, 0, len(v.Data))
	for _, m := range v.Data {
		if m.ID != "" {
			out = append(out, Model{ID: m.ID, DisplayName: m.Name})
		}
	}
	return out, nil
}

// Verify implements Client: the model list (OpenRouter: its key).
func (c *oaClient) Verify(ctx context.Context) error {
	u := c.verifyURL
	if u == "" {
		u = c.modelsURL
	}
	_, err := c.get(ctx, u)
	return err
}

// get GETs u with the key and returns its body (at most oaModelsLimit).
func (c *oaClient) get(ctx context.Context, u string) ([]byte, error) {
	return oaGet(ctx, c.http, u, c.auth)
}

// oaGet GETs u (auth adds the credential) and returns its 2xx body, at
// most oaModelsLimit bytes; other statuses as StatusError.
func oaGet(ctx context.Context, hc *http.Client, u string, auth func(*http.Request)) ([]byte, error) {
	hreq, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, fmt.Errorf("bad api_base: %w", err)
	}
	hreq.Header.Set("Accept", "application/json")
	auth(hreq)
	resp, err := hc.Do(hreq)
	if err != nil {
		return nil, Unreachable(ctx, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return nil, StatusError(resp)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, oaModelsLimit+1))
	switch {
	case err != nil:
		return nil, Unreachable(ctx, err)
	case len(b) > oaModelsLimit:
		return nil, Malformed("model list too large")
	}
	return b, nil
}

var _ Client = (*oaClient)(nil)
