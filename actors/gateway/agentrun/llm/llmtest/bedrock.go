package llmtest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
)

// Test credentials of the Bedrock stub (the AWS documentation's example
// key pair): Config.Key is BedrockKey(BedrockAccessKey, BedrockSecret, "").
const (
	BedrockAccessKey = "AKIDEXAMPLE"
	BedrockSecret    = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"
	BedrockRegion    = "us-east-1"
)

// BedrockKey is a bedrock api_key: "ID:SECRET" or "ID:SECRET:TOKEN".
func BedrockKey(id, secret, token string) string {
	if token == "" {
		return id + ":" + secret
	}
	return id + ":" + secret + ":" + token
}

// BedrockModels are the model ids the stub's ListFoundationModels lists.
var BedrockModels = []string{"anthropic.claude-3-5-sonnet-20240620-v1:0", "amazon.nova-pro-v1:0"}

// Bedrock is a stub Amazon Bedrock: the runtime API's Converse (POST
// /model/{modelId}/converse) and ConverseStream (POST
// /model/{modelId}/converse-stream, answered in AWS event-stream
// framing), and the control plane's ListFoundationModels (GET
// /foundation-models), on one loopback server. Every request must carry
// a valid SigV4 signature (service "bedrock", region Region) by a
// registered key; a wrong one is refused with 403 as Bedrock does
// (InvalidSignatureException, UnrecognizedClientException). Converse
// requests are checked against the API's rules (see parseBedrockRequest)
// and answered from the Script; Recorded.Key is the access key id, and
// OnKey takes an access key id too (register more keys with AddKey).
type Bedrock struct {
	*httptest.Server
	Script
	// Region is the region signatures must be scoped to.
	Region string
	// ModelsReply, when set, answers ListFoundationModels with its
	// Status, ErrorType and ErrorMessage instead of the model list.
	ModelsReply *Reply

	t       testing.TB
	mu      sync.Mutex
	secrets map[string]string // access key id → secret
	tokens  map[string]string // access key id → session token it needs
	sigs    map[string]string // toolUseId → signature sent with it
	n       int
}

// NewBedrock starts a stub Bedrock knowing the test credentials; it is
// closed by t.Cleanup.
func NewBedrock(t testing.TB) *Bedrock {
	t.Helper()
	b := &Bedrock{Region: BedrockRegion, t: t,
		secrets: map[string]string{BedrockAccessKey: BedrockSecret},
		tokens:  map[string]string{}, sigs: map[string]string{}}
	b.Server = httptest.NewServer(http.HandlerFunc(b.serve))
	t.Cleanup(b.Close)
	return b
}

// AddKey registers a credential the stub accepts; a non-empty token must
// come as X-Amz-Security-Token (temporary credentials).
func (b *Bedrock) AddKey(id, secret, token string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.secrets[id] = secret
	b.tokens[id] = token
}

// Key is the api_key of the test credentials.
func (b *Bedrock) Key() string { return BedrockKey(BedrockAccessKey, BedrockSecret, "") }

func (b *Bedrock) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 32<<20))
	if err != nil {
		return
	}
	keyID, se := b.verifySigV4(r, body)
	if se != nil {
		if se.clientFault {
			Fail(b.t, "bedrock: %s %s: %s", r.Method, r.URL.Path, se.msg)
		}
		bedrockWriteError(w, se.status, se.typ, se.msg, nil)
		return
	}
	rec := Recorded{Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery, Header: r.Header.Clone(), Body: body, Key: keyID}
	if r.Method == http.MethodGet && r.URL.Path == "/foundation-models" {
		b.models(w, r)
		return
	}
	model, op, ok := bedrockRoute(r)
	if !ok || r.Method != http.MethodPost {
		Fail(b.t, "bedrock: unknown route %s %s", r.Method, r.URL.EscapedPath())
		bedrockWriteError(w, 404, "UnknownOperationException", "unknown operation", nil)
		return
	}
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		Fail(b.t, "bedrock: Content-Type %q, want application/json", ct)
	}
	if model == "" {
		Fail(b.t, "bedrock: empty modelId")
	}
	_, lastUser, err := b.parseBedrockRequest(body)
	if err != nil {
		Fail(b.t, "bedrock: %s %s: %v", op, model, err)
		bedrockWriteError(w, 400, "ValidationException", err.Error(), nil)
		return
	}
	rep := b.Next(rec, lastUser)
	switch {
	case rep.Status != 0 && rep.Status != 200 && rep.Raw == "":
		bedrockWriteError(w, rep.Status, rep.ErrorType, rep.ErrorMessage, rep.Headers)
	case rep.Raw != "":
		for k, v := range rep.Headers {
			w.Header().Set(k, v)
		}
		ct := "application/json"
		if op == "converse-stream" {
			ct = "application/vnd.amazon.eventstream"
		}
		w.Header().Set("Content-Type", ct)
		w.WriteHeader(max(rep.Status, 200))
		_, _ = io.WriteString(w, rep.Raw)
	case op == "converse-stream":
		b.stream(w, r, rep)
	default:
		if rep.Hang {
			bedrockHang(r)
			return
		}
		for k, v := range rep.Headers {
			w.Header().Set(k, v)
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(b.converseAnswer(rep))
	}
}

// bedrockRoute splits /model/{modelId}/converse[-stream], the model id
// being one escaped path segment (an ARN's "/" and ":" escaped).
func bedrockRoute(r *http.Request) (model, op string, ok bool) {
	parts := strings.Split(r.URL.EscapedPath(), "/")
	if len(parts) != 4 || parts[0] != "" || parts[1] != "model" || (parts[3] != "converse" && parts[3] != "converse-stream") {
		return "", "", false
	}
	m, err := url.PathUnescape(parts[2])
	if err != nil {
		return "", "", false
	}
	return m, parts[3], true
}

// bedrockDefaultType is the AWS error type Bedrock answers a status with.
func bedrockDefaultType(status int) string {
	switch status {
	case 400:
		return "ValidationException"
	case 403:
		return "AccessDeniedException"
	case 404:
		return "ResourceNotFoundException"
	case 408:
		return "ModelTimeoutException"
	case 424:
		return "ModelErrorException"
	case 429:
		return "ThrottlingException"
	case 503:
		return "ServiceUnavailableException"
	default:
		return "InternalServerException"
	}
}

// bedrockWriteError answers an AWS REST-JSON error: the type in
// x-amzn-ErrorType (with the coral namespace suffix AWS adds) and
// {"message": …} as the body.
func bedrockWriteError(w http.ResponseWriter, status int, typ, msg string, headers map[string]string) {
	if typ == "" {
		typ = bedrockDefaultType(status)
	}
	if msg == "" {
		msg = http.StatusText(status)
	}
	for k, v := range headers {
		w.Header().Set(k, v)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Amzn-ErrorType", typ+":http://internal.amazon.com/coral/com.amazon.bedrock/")
	w.Header().Set("X-Amzn-RequestId", "00000000-0000-0000-0000-000000000000")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"message": msg})
}

func (b *Bedrock) models(w http.ResponseWriter, r *http.Request) {
	if rep := b.ModelsReply; rep != nil {
		bedrockWriteError(w, rep.Status, rep.ErrorType, rep.ErrorMessage, rep.Headers)
		return
	}
	if m := r.URL.Query().Get("byOutputModality"); m != "" && m != "TEXT" && m != "IMAGE" && m != "EMBEDDING" {
		bedrockWriteError(w, 400, "ValidationException", "byOutputModality", nil)
		return
	}
	var sums []map[string]any
	for _, id := range BedrockModels {
		provider, name, _ := strings.Cut(id, ".")
		sums = append(sums, map[string]any{
			"modelArn":                   "arn:aws:bedrock:" + b.Region + "::foundation-model/" + id,
			"modelId":                    id,
			"modelName":                  name,
			"providerName":               provider,
			"inputModalities":            []string{"TEXT"},
			"outputModalities":           []string{"TEXT"},
			"responseStreamingSupported": true,
			"inferenceTypesSupported":    []string{"ON_DEMAND"},
			"modelLifecycle":             map[string]string{"status": "ACTIVE"},
		})
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"modelSummaries": sums})
}

// callIDs gives rep's tool calls their ids ("tooluse_N" when unset) and
// remembers the signature of rep's reasoning block for each, which the
// next request must send back.
func (b *Bedrock) callIDs(rep Reply) (ids []string, sig string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.n++
	if rep.Thinking != "" {
		sig = fmt.Sprintf("sig-%d", b.n)
	}
	for i, c := range rep.ToolCalls {
		id := c.ID
		if id == "" {
			id = fmt.Sprintf("tooluse_%d_%d", b.n, i)
		}
		ids = append(ids, id)
		if sig != "" {
			b.sigs[id] = sig
		}
	}
	return ids, sig
}

// bedrockUsage is u in Bedrock's fields: inputTokens excludes the cache
// parts.
func bedrockUsage(u Usage) map[string]any {
	in := u.Prompt - u.CacheRead - u.CacheWrite
	m := map[string]any{"inputTokens": in, "outputTokens": u.Completion, "totalTokens": u.Prompt + u.Completion}
	if u.CacheRead > 0 {
		m["cacheReadInputTokens"] = u.CacheRead
	}
	if u.CacheWrite > 0 {
		m["cacheWriteInputTokens"] = u.CacheWrite
	}
	return m
}

func bedrockStop(rep Reply) string {
	if len(rep.ToolCalls) > 0 {
		return "tool_use"
	}
	return "end_turn"
}

func bedrockInput(args string) json.RawMessage {
	if strings.TrimSpace(args) == "" {
		return json.RawMessage("{}")
	}
	return json.RawMessage(args)
}

// converseAnswer is a whole Converse answer for rep.
func (b *Bedrock) converseAnswer(rep Reply) map[string]any {
	ids, sig := b.callIDs(rep)
	var content []any
	if rep.Thinking != "" {
		content = append(content, map[string]any{"reasoningContent": map[string]any{
			"reasoningText": map[string]string{"text": rep.Thinking, "signature": sig}}})
	}
	if rep.Text != "" {
		content = append(content, map[string]string{"text": rep.Text})
	}
	for i, c := range rep.ToolCalls {
		content = append(content, map[string]any{"toolUse": map[string]any{
			"toolUseId": ids[i], "name": c.Name, "input": bedrockInput(c.Args)}})
	}
	return map[string]any{
		"output":     map[string]any{"message": map[string]any{"role": "assistant", "content": content}},
		"stopReason": bedrockStop(rep),
		"usage":      bedrockUsage(UsageOf(rep)),
		"metrics":    map[string]int{"latencyMs": 42},
	}
}
