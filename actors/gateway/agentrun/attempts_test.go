package agentrun

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"gatehouse/actors/gateway"
	"gatehouse/actors/gateway/agentrun/llm"
)

// scripted is a provider type for the retry, pool and fallback tests: a
// provider's api_base names its script, which answers each call by key.
const scriptedType = "scripted_test"

type script struct {
	mu    sync.Mutex
	calls []string // the key of each call, in order
	// answer decides call n (0-based) made with key.
	answer func(key string, n int, onDelta llm.OnDelta) (llm.Result, error)
}

func (s *script) count(key string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, k := range s.calls {
		if k == key {
			n++
		}
	}
	return n
}

var (
	scriptsMu sync.Mutex
	scripts   = map[string]*script{}
)

type scriptedClient struct {
	key string
	s   *script
}

func (c scriptedClient) Complete(ctx context.Context, req llm.Request, onDelta llm.OnDelta) (llm.Result, error) {
	c.s.mu.Lock()
	n := len(c.s.calls)
	c.s.calls = append(c.s.calls, c.key)
	c.s.mu.Unlock()
	return c.s.answer(c.key, n, onDelta)
}
func (c scriptedClient) Models(context.Context) ([]llm.Model, error) {
	return []llm.Model{{ID: "m1"}}, nil
}
func (c scriptedClient) Verify(ctx context.Context) error {
	_, err := c.Complete(ctx, llm.Request{}, nil)
	return err
}

func init() {
	llm.Register(llm.TypeInfo{Name: scriptedType, New: func(cfg llm.Config) (llm.Client, error) {
		scriptsMu.Lock()
		defer scriptsMu.Unlock()
		return scriptedClient{key: cfg.Key, s: scripts[cfg.APIBase]}, nil
	}})
}

// addScripted registers agent key on a scripted provider with keys,
// answering by answer; it returns the script and the provider.
func (f *fakeGateway) addScripted(t *testing.T, key string, keys []string, settings string, answer func(string, int, llm.OnDelta) (llm.Result, error)) (*script, gateway.Provider) {
	t.Helper()
	s := &script{answer: answer}
	base := "script://" + t.Name() + "/" + key
	scriptsMu.Lock()
	scripts[base] = s
	scriptsMu.Unlock()
	f.add(key, scriptedType, base, settings, nil)
	p := f.providers[f.agents[key].ProviderID]
	f.keys[p.ID] = keys
	return s, p
}

// fallbackTo makes agent key fall back to agent other's provider, model m.
func (f *fakeGateway) fallbackTo(key, other, m string) {
	a := f.agents[key]
	a.Fallbacks = append(a.Fallbacks, gateway.Fallback{ProviderID: f.agents[other].ProviderID, Provider: other + "-p", Model: m})
	f.agents[key] = a
}

var ok = llm.Result{Content: "fine", PromptTokens: 5, CompletionTokens: 1, CacheReadTokens: 3, FinishReason: "stop"}

func status(code int, typ string, after time.Duration) *llm.Error {
	return &llm.Error{Kind: llm.KindStatus, Status: code, Type: typ, Message: "scripted", RetryAfter: after}
}

func runOnce(t *testing.T, rt *Runtime, agent string, onDelta func(string) error) (Result, error) {
	t.Helper()
	rn, err := rt.prepareRef(context.Background(), Request{Agent: agent, Messages: []Message{{Role: "user", Content: "hi"}}})
	if err != nil {
		t.Fatal(err)
	}
	return rt.execute(context.Background(), rn, onDelta)
}

// spansOf summarizes a trace's LLM spans as provider/attempt/status.
func spansOf(tr gateway.Trace) []string {
	var out []string
	for _, sp := range tr.Spans {
		if sp.Kind == gateway.SpanLLM {
			out = append(out, strings.Join([]string{sp.Provider, string(rune('0' + sp.Attempt)), sp.Status}, "/"))
		}
	}
	return out
}

func TestRetries(t *testing.T) {
	tests := []struct {
		name     string
		settings string
		answers  []error // call n fails with answers[n] (nil: ok); past the end: ok
		wantErr  bool
		spans    []string
		minWait  time.Duration
	}{
		{"429 then ok, Retry-After honoured", ``, []error{status(429, "rate_limit_error", 300*time.Millisecond)}, false,
			[]string{"a-p/1/failed", "a-p/2/ok"}, 300 * time.Millisecond},
		{"529 overloaded then ok", ``, []error{status(529, "overloaded_error", 0)}, false, []string{"a-p/1/failed", "a-p/2/ok"}, 0},
		{"500 twice then ok", ``, []error{status(500, "", 0), status(502, "", 0)}, false, []string{"a-p/1/failed", "a-p/2/failed", "a-p/3/ok"}, 0},
		{"unreachable then ok", ``, []error{&llm.Error{Kind: llm.KindUnreachable, Message: "connection reset"}}, false, []string{"a-p/1/failed", "a-p/2/ok"}, 0},
		{"retries spent", `{"max_retries":1}`, []error{status(503, "", 0), status(503, "", 0), nil}, true, []string{"a-p/1/failed", "a-p/2/failed"}, 0},
		{"400 not retried", ``, []error{status(400, "invalid_request_error", 0)}, true, []string{"a-p/1/failed"}, 0},
		{"404 not retried", ``, []error{status(404, "not_found_error", 0)}, true, []string{"a-p/1/failed"}, 0},
		{"malformed not retried", ``, []error{llm.Malformed("malformed answer")}, true, []string{"a-p/1/failed"}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake()
			f.addScripted(t, "a", []string{"sk-one-aaaaaaaa"}, tt.settings, func(_ string, n int, _ llm.OnDelta) (llm.Result, error) {
				if n < len(tt.answers) && tt.answers[n] != nil {
					return llm.Result{}, tt.answers[n]
				}
				return ok, nil
			})
			rt := newRuntime(t, f)
			t0 := time.Now()
			res, err := runOnce(t, rt, "a", nil)
			if (err != nil) != tt.wantErr {
				t.Fatalf("run = %+v, %v; want error %v", res, err, tt.wantErr)
			}
			if err != nil && !errors.Is(err, ErrProvider) {
				t.Errorf("error %v is not ErrProvider", err)
			}
			if d := time.Since(t0); d < tt.minWait {
				t.Errorf("retried after %v, before the %v the provider asked for", d, tt.minWait)
			}
			tr := f.lastTrace(t)
			if got := spansOf(tr); strings.Join(got, " ") != strings.Join(tt.spans, " ") {
				t.Errorf("spans = %v, want %v", got, tt.spans)
			}
			if !tt.wantErr && (res.CacheReadTokens != 3 || tr.Provider != "a-p" || tr.Model != "m1") {
				t.Errorf("result %+v, trace provider %q model %q", res, tr.Provider, tr.Model)
			}
		})
	}
}

// TestRetryNotAfterStreamStarted: once a delta reached the client, a
// failure is returned as it is: no retry, no fallback.
func TestRetryNotAfterStreamStarted(t *testing.T) {
	f := newFake()
	s, _ := f.addScripted(t, "a", nil, ``, func(_ string, n int, onDelta llm.OnDelta) (llm.Result, error) {
		if err := onDelta("part"); err != nil {
			return llm.Result{}, err
		}
		return llm.Result{}, llm.StreamError("overloaded_error", "Overloaded")
	})
	fb, _ := f.addScripted(t, "b", nil, ``, func(string, int, llm.OnDelta) (llm.Result, error) { return ok, nil })
	f.fallbackTo("a", "b", "m2")
	rt := newRuntime(t, f)
	var got []string
	_, err := runOnce(t, rt, "a", func(d string) error { got = append(got, d); return nil })
	var pe *ProviderError
	if !errors.As(err, &pe) || !strings.Contains(pe.Detail, "overloaded_error") {
		t.Fatalf("err = %v, want the stream's provider error", err)
	}
	if len(s.calls) != 1 || len(fb.calls) != 0 || len(got) != 1 {
		t.Errorf("calls: primary %d, fallback %d, deltas %v; want 1, 0, [part]", len(s.calls), len(fb.calls), got)
	}
}

func TestFallbacks(t *testing.T) {
	f := newFake()
	prim, _ := f.addScripted(t, "a", []string{"sk-prim-aaaaaaaa"}, `{"max_retries":1}`, func(_ string, n int, _ llm.OnDelta) (llm.Result, error) {
		return llm.Result{}, status(500, "api_error", 0)
	})
	second, _ := f.addScripted(t, "b", []string{"sk-second-aaaaaa"}, `{"max_retries":0}`, func(_ string, n int, _ llm.OnDelta) (llm.Result, error) {
		return llm.Result{}, status(529, "overloaded_error", 0)
	})
	third, _ := f.addScripted(t, "c", nil, ``, func(string, int, llm.OnDelta) (llm.Result, error) { return ok, nil })
	f.fallbackTo("a", "b", "m2")
	f.fallbackTo("a", "c", "m3")
	rt := newRuntime(t, f)
	reg := prometheus.NewRegistry()
	if err := rt.RegisterMetrics(reg); err != nil {
		t.Fatal(err)
	}
	res, err := runOnce(t, rt, "a", nil)
	if err != nil || res.Content != "fine" {
		t.Fatalf("run = %+v, %v", res, err)
	}
	tr := f.lastTrace(t)
	want := []string{"a-p/1/failed", "a-p/2/failed", "b-p/3/failed", "c-p/4/ok"}
	if got := spansOf(tr); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("spans = %v, want %v", got, want)
	}
	if tr.Provider != "c-p" || tr.Model != "m3" || tr.Status != gateway.RunOK {
		t.Errorf("trace answered by %s/%s (%s), want c-p/m3", tr.Provider, tr.Model, tr.Status)
	}
	if len(prim.calls) != 2 || len(second.calls) != 1 || len(third.calls) != 1 {
		t.Errorf("calls %d %d %d, want 2 1 1", len(prim.calls), len(second.calls), len(third.calls))
	}
	for _, c := range []struct {
		provider, result string
		want             float64
	}{{"a-p", resultRetryable, 2}, {"b-p", resultRetryable, 1}, {"c-p", resultOK, 1}} {
		if got := counterValue(rt.metrics.attempts.WithLabelValues(c.provider, c.result)); got != c.want {
			t.Errorf("attempts{%s,%s} = %v, want %v", c.provider, c.result, got, c.want)
		}
	}
	if got := counterValue(rt.metrics.fallbacks.WithLabelValues("a-p")); got != 1 {
		t.Errorf("fallbacks{a-p} = %v", got)
	}
}

// TestKeyPool: a revoked key (401) is set aside until the provider is
// updated, a rate-limited one cools down for its Retry-After; calls go on
// with the good key at once, and later calls skip the others without a
// network call.
func TestKeyPool(t *testing.T) {
	const revoked, limited, good = "sk-revoked-aaaa1111", "sk-limited-aaaa2222", "sk-good-aaaaaa3333"
	f := newFake()
	s, p := f.addScripted(t, "a", []string{revoked, limited, good}, `{"max_retries":0}`, func(key string, _ int, _ llm.OnDelta) (llm.Result, error) {
		switch key {
		case revoked:
			return llm.Result{}, status(401, "authentication_error", 0)
		case limited:
			return llm.Result{}, status(429, "rate_limit_error", time.Hour)
		}
		return ok, nil
	})
	rt := newRuntime(t, f)
	reg := prometheus.NewRegistry()
	if err := rt.RegisterMetrics(reg); err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		if res, err := runOnce(t, rt, "a", nil); err != nil || res.Content != "fine" {
			t.Fatalf("run %d = %+v, %v", i, res, err)
		}
	}
	if s.count(revoked) != 1 || s.count(limited) != 1 || s.count(good) != 4 {
		t.Errorf("calls by key: revoked %d, limited %d, good %d; want 1, 1, 4", s.count(revoked), s.count(limited), s.count(good))
	}
	h := rt.ProviderHealth(p)
	states := map[string]string{}
	for _, k := range h.Keys {
		states[k.Key] = k.State
		if strings.Contains(k.Key, "aaaa") {
			t.Errorf("key shown unmasked: %q", k.Key)
		}
	}
	if states["****1111"] != KeyRejected || states["****2222"] != KeyCoolingDown || states["****3333"] != KeyReady || h.LastError == "" {
		t.Errorf("health = %+v", h)
	}
	for _, k := range h.Keys {
		if k.State == KeyCoolingDown && (k.RetryAt == nil || time.Until(*k.RetryAt) < 50*time.Minute) {
			t.Errorf("cooling key retry_at = %v, want about an hour ahead", k.RetryAt)
		}
	}
	if got := counterValue(rt.metrics.attempts.WithLabelValues("a-p", resultRejected)); got != 1 {
		t.Errorf("key_rejected attempts = %v", got)
	}
	n, err := gatherCount(reg, "gatehouse_provider_keys_cooling", "gatehouse_provider_keys_rejected")
	if err != nil || n != 2 {
		t.Errorf("pool gauges: %d series, %v", n, err)
	}
	// An update of the provider (a new record) sets every key ready again.
	p.UpdatedAt = p.UpdatedAt.Add(time.Second)
	f.providers[p.ID] = p
	if _, err := runOnce(t, rt, "a", nil); err != nil {
		t.Fatal(err)
	}
	if h := rt.ProviderHealth(p); len(h.Keys) != 3 || h.Keys[0].State != KeyRejected {
		t.Errorf("after update: %+v (the first call went to the revoked key again and set it aside)", h)
	}
}

// TestCoolingProviderSkipped: a provider whose only key is cooling down
// is skipped without a call, and the turn goes to the fallback.
func TestCoolingProviderSkipped(t *testing.T) {
	f := newFake()
	prim, _ := f.addScripted(t, "a", []string{"sk-prim-aaaaaaaa"}, ``, func(string, int, llm.OnDelta) (llm.Result, error) {
		return llm.Result{}, status(429, "rate_limit_error", time.Hour)
	})
	fb, _ := f.addScripted(t, "b", nil, ``, func(string, int, llm.OnDelta) (llm.Result, error) { return ok, nil })
	f.fallbackTo("a", "b", "m2")
	rt := newRuntime(t, f)
	for range 3 {
		if _, err := runOnce(t, rt, "a", nil); err != nil {
			t.Fatal(err)
		}
	}
	if len(prim.calls) != 1 || len(fb.calls) != 3 {
		t.Errorf("calls: primary %d, fallback %d; want 1, 3", len(prim.calls), len(fb.calls))
	}
	if got := spansOf(f.lastTrace(t)); strings.Join(got, " ") != "a-p/1/failed b-p/2/ok" {
		t.Errorf("spans = %v, want the primary skipped then the fallback", got)
	}
	// Without a fallback, the cooling provider fails fast.
	a := f.agents["a"]
	a.Fallbacks = nil
	f.agents["a"] = a
	t0 := time.Now()
	if _, err := runOnce(t, rt, "a", nil); !errors.Is(err, ErrProvider) || time.Since(t0) > time.Second {
		t.Errorf("run on a cooling provider = %v after %v", err, time.Since(t0))
	}
}

func counterValue(c prometheus.Counter) float64 {
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		return -1
	}
	return m.GetCounter().GetValue()
}

// gatherCount counts the series of the named families in reg.
func gatherCount(reg *prometheus.Registry, names ...string) (int, error) {
	fams, err := reg.Gather()
	if err != nil {
		return 0, err
	}
	n := 0
	for _, f := range fams {
		for _, name := range names {
			if f.GetName() == name {
				n += len(f.GetMetric())
			}
		}
	}
	return n, nil
}

// TestCoolingRetryAfter: a turn whose every provider is cooling down
// fails without a call, telling when the first is ready again.
func TestCoolingRetryAfter(t *testing.T) {
	f := newFake()
	s, _ := f.addScripted(t, "a", []string{"sk-only-aaaaaaaa"}, `{"max_retries":0}`, func(string, int, llm.OnDelta) (llm.Result, error) {
		return llm.Result{}, status(429, "rate_limit_error", 90*time.Second)
	})
	rt := newRuntime(t, f)
	if _, err := runOnce(t, rt, "a", nil); err == nil {
		t.Fatal("a rate-limited call succeeded")
	}
	_, err := runOnce(t, rt, "a", nil)
	var pe *ProviderError
	if !errors.As(err, &pe) || pe.RetryAfter < 80*time.Second || pe.RetryAfter > 90*time.Second || len(s.calls) != 1 {
		t.Errorf("second turn = %v (retry after %v), %d calls; want no call and about 90 s", err, pe.RetryAfter, len(s.calls))
	}
}

// TestThinkingNotSentToAnotherProvider: reasoning blocks go back to the
// provider that wrote them, within a tool loop, and never to a fallback.
func TestThinkingNotSentToAnotherProvider(t *testing.T) {
	f := newFake()
	var seen [][]int // per call to b: the thinking blocks of each message
	f.addScripted(t, "a", nil, `{"max_retries":0}`, func(_ string, n int, _ llm.OnDelta) (llm.Result, error) {
		if n == 0 { // the first round: a tool call with a signed thought
			return llm.Result{ToolCalls: []llm.ToolCall{{ID: "c1", Type: "function", Function: llm.ToolFunction{Name: "no_such_tool", Arguments: "{}"}}},
				Thinking: []llm.Thinking{{Text: "hmm", Signature: "sig-a"}}, FinishReason: "tool_calls"}, nil
		}
		return llm.Result{}, status(503, "", 0) // then a falls over
	})
	f.addScripted(t, "b", nil, ``, func(string, int, llm.OnDelta) (llm.Result, error) { return ok, nil })
	f.fallbackTo("a", "b", "m2")
	rt := newRuntime(t, f)
	var mu sync.Mutex
	rn, err := rt.prepareRef(context.Background(), Request{Agent: "a", Messages: []Message{{Role: "user", Content: "hi"}}})
	if err != nil {
		t.Fatal(err)
	}
	// b's client, wrapped to see its requests.
	pp, err := rt.pools.get(rn.targets[1].p)
	if err != nil {
		t.Fatal(err)
	}
	inner := pp.slots[0].client
	pp.slots[0].client = clientFunc(func(ctx context.Context, req llm.Request, od llm.OnDelta) (llm.Result, error) {
		mu.Lock()
		var counts []int
		for _, m := range req.Messages {
			counts = append(counts, len(m.Thinking))
		}
		seen = append(seen, counts)
		mu.Unlock()
		return inner.Complete(ctx, req, od)
	})
	if _, err := rt.execute(context.Background(), rn, nil); err != nil {
		t.Fatal(err)
	}
	if len(seen) != 1 {
		t.Fatalf("fallback calls = %d", len(seen))
	}
	for i, n := range seen[0] {
		if n != 0 {
			t.Errorf("message %d sent to the fallback with %d thinking blocks", i, n)
		}
	}
	if len(seen[0]) < 3 {
		t.Errorf("fallback got %d messages, want the tool loop's history", len(seen[0]))
	}
}

// clientFunc is a Client whose Complete is a function.
type clientFunc func(context.Context, llm.Request, llm.OnDelta) (llm.Result, error)

func (f clientFunc) Complete(ctx context.Context, req llm.Request, od llm.OnDelta) (llm.Result, error) {
	return f(ctx, req, od)
}
func (clientFunc) Models(context.Context) ([]llm.Model, error) { return nil, nil }
func (clientFunc) Verify(context.Context) error                { return nil }
