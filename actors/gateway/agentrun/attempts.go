package agentrun

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"gatehouse/actors/gateway"
	"gatehouse/actors/gateway/agentrun/llm"
)

// One provider call of a turn, made robust: the agent's provider and
// model first, then its fallbacks in order. Each target is tried with its
// ready keys; a retryable failure (llm.Error.Retryable) is retried after
// a jittered backoff that honours the wait the provider asked for, up to
// the provider's settings.max_retries (default 2); a key refused or rate
// limited is set aside or cooled down and the next ready key tried at
// once. Once its retries are spent, or when none of its keys is ready,
// the call goes to the next target. Nothing is retried, and no fallback
// taken, once part of the answer has reached the client (a streamed
// delta), or for a failure that is not retryable (400, 404, a malformed
// answer). Every attempt is a span of the run.

// target is one provider and model a call may go to.
type target struct {
	p     gateway.Provider
	model string
}

// DefaultMaxRetries is a provider's settings.max_retries when unset.
const DefaultMaxRetries = 2

// maxRetriesOf reads settings.max_retries (0..10; default 2).
func maxRetriesOf(settings json.RawMessage) int {
	var st struct {
		MaxRetries *int `json:"max_retries"`
	}
	if len(settings) == 0 || json.Unmarshal(settings, &st) != nil || st.MaxRetries == nil {
		return DefaultMaxRetries
	}
	return min(max(*st.MaxRetries, 0), 10)
}

// attempt results, the values of the attempts metric's result label.
const (
	resultOK          = "ok"
	resultRateLimited = "rate_limited"
	resultRejected    = "key_rejected"
	resultRetryable   = "retryable_error"
	resultError       = "error"
	resultSkipped     = "skipped"
)

// called is what one call of the turn did: its result, a span per
// attempt, and the target that answered.
type called struct {
	res      Result
	spans    []gateway.Span
	answered target
}

// complete makes one call of run rn: req to rn's targets in order, as
// described above. It returns the answer (or the last failure) with a
// span per attempt; the last span is the answering (or failing) one.
func (rt *Runtime) complete(ctx context.Context, rn *Run, req llm.Request, onDelta func(string) error) (called, error) {
	var out called
	var lastErr error
	attempt := 0
	coolingOnly := true // no call made yet: every target skipped so far
	for ti, tg := range rn.targets {
		last := ti == len(rn.targets)-1
		pp, err := rt.pools.get(tg.p)
		if err != nil {
			lastErr = err
			continue
		}
		if !rn.keysRedacted[tg.p.ID] {
			rn.redact = rn.redact.with(pp.keys...)
			rn.keysRedacted[tg.p.ID] = true
		}
		retries := pp.retries
		tries := 0
		for {
			now := time.Now()
			slot, readyAt := pp.pick(now)
			if slot == nil {
				wait := time.Until(readyAt)
				if readyAt.IsZero() || !last || wait > maxRetryWait || tries > retries || !fits(ctx, wait) {
					attempt++
					msg := "skipped: every key cooling down"
					if readyAt.IsZero() {
						msg = "skipped: every key refused by the provider"
					}
					out.spans = append(out.spans, rt.skippedSpan(rn, tg, attempt, msg))
					rt.metrics.attempt(tg.p.Name, resultSkipped)
					if lastErr == nil || coolingOnly {
						pe := &ProviderError{Detail: fmt.Sprintf("%s: %s", tg.p.Name, msg[len("skipped: "):])}
						if !readyAt.IsZero() {
							pe.RetryAfter = max(time.Until(readyAt), time.Second)
							if prev, ok := lastErr.(*ProviderError); ok && prev.RetryAfter > 0 {
								pe.RetryAfter = min(pe.RetryAfter, prev.RetryAfter) // the first provider ready again
							}
						}
						lastErr = pe
					}
					break
				}
				if err := sleep(ctx, wait); err != nil {
					return out, err
				}
				continue
			}
			attempt++
			tries++
			coolingOnly = false
			res, sp, err := rt.attemptOnce(ctx, rn, tg, slot, req, onDelta, attempt)
			out.spans = append(out.spans, sp)
			if err == nil {
				rt.metrics.attempt(tg.p.Name, resultOK)
				out.res, out.answered = res, tg
				return out, nil
			}
			var le *llm.Error
			if !errors.As(err, &le) || errors.Is(err, errStarted) || ctx.Err() != nil {
				return out, unwrapStarted(err) // ctx, onDelta's error, or a failure after the answer began
			}
			lastErr = err
			switch {
			case le.KeyRejected():
				pp.failed(slot, le, 0, now)
				rt.metrics.attempt(tg.p.Name, resultRejected)
				tries-- // another key of the pool is not a retry
				continue
			case le.RateLimited():
				cool := le.RetryAfter
				if cool <= 0 {
					cool = max(defaultCooldown, backoff(tries))
				}
				pp.failed(slot, le, cool, now)
				rt.metrics.attempt(tg.p.Name, resultRateLimited)
				if next, _ := pp.pick(time.Now()); next != nil {
					tries-- // another key of the pool is ready: not a retry, no wait
					continue
				}
			case le.Retryable():
				pp.noted(le, now)
				rt.metrics.attempt(tg.p.Name, resultRetryable)
			default:
				pp.noted(le, now)
				rt.metrics.attempt(tg.p.Name, resultError)
				return out, err
			}
			if tries > retries {
				break
			}
			wait := max(backoff(tries), le.RetryAfter)
			if wait > maxRetryWait || !fits(ctx, wait) {
				break
			}
			if le.RateLimited() && !last {
				break // the key cools down; the fallback answers now
			}
			if err := sleep(ctx, wait); err != nil {
				return out, err
			}
		}
		if !last {
			rt.metrics.fallback(tg.p.Name)
		}
	}
	if lastErr == nil {
		lastErr = providerError("no provider to call")
	}
	return out, lastErr
}

// fits reports whether waiting d leaves ctx's deadline ahead.
func fits(ctx context.Context, d time.Duration) bool {
	dl, ok := ctx.Deadline()
	return !ok || time.Until(dl) > d
}

// errStarted marks a failure after part of the answer reached onDelta.
var errStarted = errors.New("answer already started")

type startedError struct{ err error }

func (e *startedError) Error() string   { return e.err.Error() }
func (e *startedError) Unwrap() []error { return []error{e.err, errStarted} }
func unwrapStarted(err error) error {
	var s *startedError
	if errors.As(err, &s) {
		return s.err
	}
	return err
}

// attemptOnce makes one attempt with slot's key. A failure after a delta
// reached onDelta comes back as a *startedError.
func (rt *Runtime) attemptOnce(ctx context.Context, rn *Run, tg target, slot *keySlot, req llm.Request, onDelta func(string) error, n int) (Result, gateway.Span, error) {
	req.Model = tg.model
	if tg.p.ID != rn.thinkingBy {
		req.Messages = withoutThinking(req.Messages) // a fallback: the blocks are the other provider's
	}
	started := false
	var od llm.OnDelta
	if onDelta != nil {
		od = func(s string) error { started = true; return onDelta(s) }
	}
	start, t0 := rt.now(), time.Now()
	hold, err := rt.budgets.reserve(ctx, rn, tg, &req) // budget.go: nothing is sent when it refuses
	if err != nil {
		return Result{}, gateway.Span{ID: spanID(), Name: "llm.call " + tg.model, Kind: gateway.SpanLLM, Model: tg.model, Provider: tg.p.Name,
			ProviderType: tg.p.ProviderType, Attempt: n, StartedAt: start.UTC(), Status: gateway.RunFailed, Error: err.Error()}, err
	}
	res, err := slot.client.Complete(ctx, req, od)
	rt.budgets.settle(hold, res)
	sp := gateway.Span{
		ID: spanID(), Name: "llm.call " + tg.model, Kind: gateway.SpanLLM, Model: tg.model,
		Provider: tg.p.Name, ProviderType: tg.p.ProviderType, Attempt: n,
		StartedAt: start.UTC(), DurationMs: time.Since(t0).Milliseconds(),
		PromptTokens: res.PromptTokens, CompletionTokens: res.CompletionTokens,
		CacheReadTokens: res.CacheReadTokens, CacheWriteTokens: res.CacheWriteTokens, ReasoningTokens: res.ReasoningTokens,
		Status: gateway.RunOK, InputPreview: rn.redact.preview(lastContent(req.Messages)), OutputPreview: rn.redact.preview(res.Content),
	}
	if err != nil {
		sp.Status, sp.Error = gateway.RunFailed, rn.redact.preview(errText(err))
		var le *llm.Error
		if errors.As(err, &le) {
			pe := &ProviderError{Detail: rn.redact.preview(le.Error()), cause: le}
			if le.RateLimited() {
				pe.RetryAfter = le.RetryAfter // the client may come back then
			}
			err = pe
			if started {
				err = &startedError{err: err}
			}
		}
		return Result{}, sp, err
	}
	return res, sp, nil
}

// errText is how a failure reads in a span.
func errText(err error) string {
	var le *llm.Error
	if errors.As(err, &le) {
		return "provider: " + le.Error()
	}
	return err.Error()
}

// skippedSpan is the span of a target passed over without a call.
func (rt *Runtime) skippedSpan(rn *Run, tg target, n int, msg string) gateway.Span {
	return gateway.Span{
		ID: spanID(), Name: "llm.call " + tg.model, Kind: gateway.SpanLLM, Model: tg.model,
		Provider: tg.p.Name, ProviderType: tg.p.ProviderType, Attempt: n,
		StartedAt: rt.now().UTC(), Status: gateway.RunFailed, Error: msg,
	}
}

// asLLMError finds a provider client's *llm.Error in err.
func asLLMError(err error) (*llm.Error, bool) {
	var le *llm.Error
	if err == nil || !errors.As(err, &le) {
		return nil, false
	}
	return le, true
}
