package llm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// maxErrorBody is how much of an error answer is read to find the
// provider's error type and message.
const maxErrorBody = 64 << 10

// maxMessage bounds Error.Message.
const maxMessage = 300

// StatusError is the *Error of an answer with a non-2xx status: it reads
// up to 64 KiB of resp's body for the provider's error type and message
// (the shapes {"error": {"type", "message"}}, {"error": {"status",
// "message"}}, {"type", "message"}, {"message"} and {"error": "…"}), and
// the wait it asks for (RetryAfter). It does not close the body.
func StatusError(resp *http.Response) *Error {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	typ, msg := ErrorBody(b)
	if msg == "" {
		msg = http.StatusText(resp.StatusCode)
	}
	if msg == "" {
		msg = "error"
	}
	return &Error{Kind: KindStatus, Status: resp.StatusCode, Type: typ, Message: Clip(msg), RetryAfter: RetryAfter(resp.Header, b)}
}

// ErrorBody finds a provider's error type and message in an error body;
// "" for what it cannot find.
func ErrorBody(b []byte) (typ, msg string) {
	var v struct {
		Type    string          `json:"type"`
		Message string          `json:"message"`
		Error   json.RawMessage `json:"error"`
		Typ2    string          `json:"__type"` // AWS
	}
	if json.Unmarshal(b, &v) != nil {
		return "", ""
	}
	typ, msg = v.Type, v.Message
	if v.Typ2 != "" {
		typ = v.Typ2
		if i := strings.LastIndexByte(typ, '#'); i >= 0 {
			typ = typ[i+1:]
		}
	}
	if len(v.Error) > 0 {
		var s string
		if json.Unmarshal(v.Error, &s) == nil {
			return typ, s
		}
		var e struct {
			Type    string `json:"type"`
			Status  string `json:"status"`
			Code    any    `json:"code"`
			Message string `json:"message"`
		}
		if json.Unmarshal(v.Error, &e) == nil {
			switch {
			case e.Type != "":
				typ = e.Type
			case e.Status != "":
				typ = e.Status
			default:
				if c, ok := e.Code.(string); ok {
					typ = c
				}
			}
			if e.Message != "" {
				msg = e.Message
			}
		}
	}
	if typ == "error" { // Anthropic's envelope type
		typ = ""
	}
	return typ, msg
}

// RetryAfter is the wait an error answer asks for: retry-after-ms, then
// Retry-After (seconds or an HTTP date), then a google.rpc.RetryInfo
// detail's retryDelay in body; 0 when none. It is capped at one hour.
func RetryAfter(h http.Header, body []byte) time.Duration {
	d := retryAfter(h, body)
	return min(max(d, 0), time.Hour)
}

func retryAfter(h http.Header, body []byte) time.Duration {
	if v := h.Get("retry-after-ms"); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms >= 0 {
			return time.Duration(ms * float64(time.Millisecond))
		}
	}
	if v := h.Get("Retry-After"); v != "" {
		if s, err := strconv.ParseFloat(v, 64); err == nil && s >= 0 {
			return time.Duration(s * float64(time.Second))
		}
		if t, err := http.ParseTime(v); err == nil {
			return time.Until(t)
		}
	}
	if len(body) > 0 && strings.Contains(string(body), "RetryInfo") {
		var v struct {
			Error struct {
				Details []struct {
					Type       string `json:"@type"`
					RetryDelay string `json:"retryDelay"`
				} `json:"details"`
			} `json:"error"`
		}
		if json.Unmarshal(body, &v) == nil {
			for _, d := range v.Error.Details {
				if strings.HasSuffix(d.Type, "google.rpc.RetryInfo") {
					if dur, err := time.ParseDuration(d.RetryDelay); err == nil {
						return dur
					}
				}
			}
		}
	}
	return 0
}

// Unreachable is the *Error of a call that got no answer, or ctx's error
// when ctx is done (a cancelled call is not the provider's failure).
func Unreachable(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	msg := "unreachable"
	switch {
	case errors.Is(err, context.DeadlineExceeded) || isTimeout(err):
		msg = "timed out"
	case strings.Contains(err.Error(), "connection reset"):
		msg = "connection reset"
	case strings.Contains(err.Error(), "connection refused"):
		msg = "connection refused"
	}
	return &Error{Kind: KindUnreachable, Message: msg}
}

func isTimeout(err error) bool {
	var t interface{ Timeout() bool }
	return errors.As(err, &t) && t.Timeout()
}

// Malformed is the *Error of an answer that cannot be read.
func Malformed(what string) *Error { return &Error{Kind: KindMalformed, Message: what} }

// TooLarge is the *Error of an answer past maxAnswer bytes.
func TooLarge(maxAnswer int) *Error {
	return &Error{Kind: KindMalformed, Message: fmt.Sprintf("answer larger than %d bytes", maxAnswer)}
}

// StreamError is the *Error of an error the provider reported mid-stream.
func StreamError(typ, msg string) *Error {
	if msg == "" {
		msg = "error in stream"
	}
	return &Error{Kind: KindStream, Type: typ, Message: Clip(msg)}
}

// Clip bounds a provider's message to a few hundred bytes of valid UTF-8.
func Clip(s string) string {
	if len(s) <= maxMessage {
		return s
	}
	s = s[:maxMessage]
	for len(s) > 0 && !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s + "…"
}

// AnswerSize is what an answer holds against MaxAnswer: text, tool
// names and arguments, thinking.
func AnswerSize(r *Result) int {
	n := len(r.Content)
	for _, c := range r.ToolCalls {
		n += len(c.ID) + len(c.Function.Name) + len(c.Function.Arguments)
	}
	for _, t := range r.Thinking {
		n += len(t.Text) + len(t.Signature) + len(t.Redacted)
	}
	return n
}

// BodyLimit is the bound on a whole (non-streamed) answer's body for an
// answer of at most maxAnswer bytes: room for JSON's escaping and
// framing.
func BodyLimit(maxAnswer int) int64 { return 2*int64(maxAnswer) + 64<<10 }

// LimitedHTTP returns a client over c's transport whose answers' bodies
// fail with a TooLarge *Error after limit bytes: for SDKs that read a
// whole body themselves. Streams are bounded by the caller instead (its
// deltas), so pass a limit that fits the largest stream too.
func LimitedHTTP(c *http.Client, limit int64, maxAnswer int) *http.Client {
	cc := *c
	rt := c.Transport
	if rt == nil {
		rt = http.DefaultTransport
	}
	cc.Transport = limitRT{rt: rt, limit: limit, maxAnswer: maxAnswer}
	return &cc
}

type limitRT struct {
	rt        http.RoundTripper
	limit     int64
	maxAnswer int
}

func (l limitRT) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := l.rt.RoundTrip(r)
	if err != nil {
		return nil, err
	}
	resp.Body = &limitBody{ReadCloser: resp.Body, left: l.limit, maxAnswer: l.maxAnswer}
	return resp, nil
}

type limitBody struct {
	io.ReadCloser
	left      int64
	maxAnswer int
}

func (b *limitBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		return 0, TooLarge(b.maxAnswer)
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.ReadCloser.Read(p)
	b.left -= int64(n)
	return n, err
}
