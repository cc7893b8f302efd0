// Package llmtest has stub LLM providers for tests: one loopback HTTP
// server per provider API, each speaking its API as the public reference
// documents it, answering from a script of replies and checking every
// request it receives against the API's rules (a violation fails the
// test). Tests of the provider clients and of the gateway end to end
// share them.
package llmtest

import (
	"net/http"
	"strings"
	"sync"
	"testing"
)

// Reply scripts one answer of a stub provider.
type Reply struct {
	// Text is the answer's text, streamed word by word (each word with
	// its leading space) when the request streams.
	Text string
	// ToolCalls are calls the model asks for (after Text, if any).
	ToolCalls []Call
	// Thinking is a reasoning block sent before the text, where the
	// provider has them (Anthropic: signature "sig-" + a counter).
	Thinking string
	// Status, when not 0 or 200, answers with that error status (and
	// ErrorType, ErrorMessage in the provider's error shape).
	Status int
	// Headers are added to the answer (Retry-After, retry-after-ms).
	Headers map[string]string
	// ErrorType and ErrorMessage are the provider's error for Status or
	// for StreamErrorAfter.
	ErrorType, ErrorMessage string
	// StreamErrorAfter > 0: a streamed answer sends that many text
	// deltas, then the provider's mid-stream error (ErrorType).
	StreamErrorAfter int
	// Raw, when not "", is sent verbatim as the body (with Status, or
	// 200): a malformed answer.
	Raw string
	// Hang streams the first delta, then waits until the client leaves
	// (a non-streamed answer waits before answering).
	Hang bool
	// Usage is the usage reported; zero reports Prompt 10 and Completion
	// the number of words of Text (plus one per tool call).
	Usage Usage
}

// Call is one tool call of a Reply. Args is a JSON object ("" : {}).
type Call struct {
	ID, Name, Args string
}

// Usage is the token usage a stub reports, in OpenAI's convention
// (Prompt includes the cache parts, Completion includes Reasoning); each
// stub converts it to its API's own fields.
type Usage struct {
	Prompt, Completion, CacheRead, CacheWrite, Reasoning int64
}

// Recorded is one request a stub received.
type Recorded struct {
	Method, Path, Query string
	Header              http.Header
	Body                []byte
	// Key is the credential the request carried, as the API carries it.
	Key string
}

// Script is what a stub answers and what it received. Its methods are
// safe for concurrent use.
type Script struct {
	mu      sync.Mutex
	replies []Reply
	byKey   map[string]Reply
	reqs    []Recorded
	// Default is answered when no reply is queued and no key reply
	// applies; its zero value answers "stub: " and the last user text.
	Default *Reply
}

// Push queues replies, answered in order, one per request.
func (s *Script) Push(r ...Reply) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.replies = append(s.replies, r...)
}

// OnKey makes every request carrying credential key answer r (before
// the queue): a revoked key (401), a rate-limited one (429).
func (s *Script) OnKey(key string, r Reply) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.byKey == nil {
		s.byKey = map[string]Reply{}
	}
	s.byKey[key] = r
}

// Next records req and returns the reply it gets: the key's reply, the
// next queued one, Default, or the text "stub: " + lastUser.
func (s *Script) Next(req Recorded, lastUser string) Reply {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reqs = append(s.reqs, req)
	if r, ok := s.byKey[req.Key]; ok {
		return r
	}
	if len(s.replies) > 0 {
		r := s.replies[0]
		s.replies = s.replies[1:]
		return r
	}
	if s.Default != nil {
		return *s.Default
	}
	return Reply{Text: "stub: " + lastUser}
}

// Requests returns a copy of the requests received so far.
func (s *Script) Requests() []Recorded {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Recorded(nil), s.reqs...)
}

// Pending is how many queued replies are left.
func (s *Script) Pending() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.replies)
}

// Words splits a reply's text into the deltas a stream sends: each word
// with the space before it.
func Words(text string) []string {
	var out []string
	for i, w := range strings.Fields(text) {
		if i > 0 {
			w = " " + w
		}
		out = append(out, w)
	}
	return out
}

// UsageOf is r's usage with the zero value's defaults filled in.
func UsageOf(r Reply) Usage {
	u := r.Usage
	if u == (Usage{}) {
		u.Prompt = 10
		u.Completion = int64(len(strings.Fields(r.Text)) + len(r.ToolCalls))
	}
	return u
}

// Fail reports a request that breaks the API's rules.
func Fail(t testing.TB, format string, args ...any) {
	t.Helper()
	t.Errorf("stub provider: "+format, args...)
}
