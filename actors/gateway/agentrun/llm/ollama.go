// ollama: Ollama's native chat API, POST {api_base}/api/chat (default
// http://127.0.0.1:11434), and GET /api/tags for its models, following
// https://github.com/ollama/ollama/blob/main/docs/api.md. It streams
// NDJSON by default, so "stream" is always sent; tool calls carry their
// arguments as a JSON object (converted to and from Result's string) and
// no id (one is made up); tool results go back as role "tool" messages
// naming the tool (tool_name). No key is needed; one set is sent as
// Authorization: Bearer (an Ollama behind a proxy).
//
// Hand-written on net/http: github.com/ollama/ollama/api would bring the
// server's module graph for two request and two answer shapes.

package llm

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
)

func init() {
	Register(TypeInfo{Name: "ollama", DefaultBase: "http://127.0.0.1:11434", New: newOllama, Validate: validateOllama})
}

// ollamaSettings is what ollama reads from settings.
type ollamaSettings struct {
	// MaxTokens is options.num_predict when the request gives none.
	MaxTokens int
	// NumCtx is options.num_ctx, the context window (Ollama's default is
	// small and silently cuts a long prompt).
	NumCtx int
}

func parseOllamaSettings(raw json.RawMessage) (ollamaSettings, error) {
	var s ollamaSettings
	f, err := oaFields(raw)
	if err != nil {
		return s, err
	}
	if s.MaxTokens, err = oaInt(f, "max_tokens", 1, 1<<24); err != nil {
		return s, err
	}
	s.NumCtx, err = oaInt(f, "num_ctx", 1, 1<<24)
	return s, err
}

var validateOllama = validateBaseAnd(false, parseOllamaSettings)

func newOllama(cfg Config) (Client, error) {
	if err := oaCheckBase(cfg.APIBase); err != nil {
		return nil, err
	}
	st, err := parseOllamaSettings(cfg.Settings)
	if err != nil {
		return nil, err
	}
	return &ollama{http: cfg.HTTP, base: strings.TrimRight(cfg.APIBase, "/"), key: cfg.Key, set: st, maxAnswer: cfg.MaxAnswer}, nil
}

// ollama is one Ollama server.
type ollama struct {
	http      *http.Client
	base      string
	key       string
	set       ollamaSettings
	maxAnswer int
}

// Complete implements Client.
func (o *ollama) Complete(ctx context.Context, req Request, onDelta OnDelta) (Result, error) {
	body, err := json.Marshal(o.request(req, onDelta != nil))
	if err != nil {
		return Result{}, fmt.Errorf("ollama: encode request: %w", err)
	}
	rctx, cancel := context.WithCancel(ctx) // cancel also bounds the drain
	defer cancel()
	hreq, err := http.NewRequestWithContext(rctx, http.MethodPost, o.base+"/api/chat", bytes.NewReader(body))
	if err != nil {
		return Result{}, fmt.Errorf("ollama: bad api_base: %w", err)
	}
	hreq.Header.Set("Content-Type", "application/json")
	o.auth(hreq)
	resp, err := o.http.Do(hreq)
	if err != nil {
		return Result{}, Unreachable(ctx, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return Result{}, StatusError(resp)
	}
	var res Result
	if onDelta == nil {
		res, err = ollamaReadAnswer(ctx, resp.Body, o.maxAnswer)
	} else {
		res, err = ollamaReadStream(ctx, resp.Body, o.maxAnswer, onDelta)
	}
	if err == nil {
		oaDrain(rctx, cancel, resp.Body)
	}
	return res, err
}

func (o *ollama) request(req Request, stream bool) ollamaRequest {
	r := ollamaRequest{Model: req.Model, Messages: ollamaMessages(req.Messages), Tools: oaTools(req.Tools), Stream: stream}
	n := req.MaxTokens
	if n <= 0 {
		n = o.set.MaxTokens
	}
	if n > 0 || o.set.NumCtx > 0 {
		r.Options = &ollamaOptions{NumPredict: n, NumCtx: o.set.NumCtx}
	}
	return r
}

func (o *ollama) auth(r *http.Request) {
	if o.key != "" {
		r.Header.Set("Authorization", "Bearer "+o.key)
	}
}

// Models implements Client: GET /api/tags, models[].name.
func (o *ollama) Models(ctx context.Context) ([]Model, error) {
	b, err := oaGet(ctx, o.http, o.base+"/api/tags", o.auth)
	if err != nil {
		return nil, err
	}
	var v struct {
		Models []struct {
			Name string `json:"name"`
		} `json:"models"`
	}
	if json.Unmarshal(b, &v) != nil {
		return nil, Malformed("malformed model list")
	}
	out := make([]Model, 0, len(v.Models))
	for _, m := range v.Models {
		if m.Name != "" {
			out = append(out, Model{ID: m.Name})
		}
	}
	return out, nil
}

// Verify implements Client: the model list.
func (o *ollama) Verify(ctx context.Context) error {
	_, err := o.Models(ctx)
	return err
}

var _ Client = (*ollama)(nil)
