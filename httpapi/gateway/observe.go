package gateway

import (
	"context"
	"strconv"
	"time"

	"github.com/google/uuid"

	"gatehouse/actors/gateway"
)

// RunStore is what usage and traces need from the gateway. Safe for
// concurrent use.
type RunStore interface {
	TracePage(ctx context.Context, f gateway.TraceFilter) (gateway.TracePage, error)
	// Trace errors: ErrNotFound (unknown or aged out).
	Trace(ctx context.Context, id string) (gateway.Trace, error)
	// UsageSeries errors: ErrInvalid (an unknown grouping).
	UsageSeries(ctx context.Context, q gateway.UsageQuery) ([]gateway.UsagePoint, error)
	UsageTotals(ctx context.Context, from, to time.Time, user string) (gateway.UsageTotals, error)
	// Now is the gateway's clock: periods end now.
	Now() time.Time
}

var _ RunStore = (*gateway.Gateway)(nil)

// Bounds of the usage queries, and of a page of any paged list (traces,
// activity, memory, delegations, custom tools).
const (
	maxHourlyRange = 31 * 24 * time.Hour
	maxDailyRange  = 400 * 24 * time.Hour
	maxPage        = 200
	defPage        = 50
)

// pageBounds checks a page's limit (1..maxPage, 0: defPage) and offset
// and returns the limit to use.
func pageBounds(limit, offset int) (int, error) {
	switch {
	case limit < 0 || limit > maxPage:
		return 0, errInvalid("limit must be in 1.." + strconv.Itoa(maxPage))
	case offset < 0:
		return 0, errInvalid("offset must be >= 0")
	case limit == 0:
		return defPage, nil
	}
	return limit, nil
}

// ownUser returns the user whose runs c may read given the user it asks
// for ("" for every user: trusted callers only).
func ownUser(c Caller, asked string) (string, error) {
	if c.principal().SeesAll() {
		return asked, nil
	}
	if asked != "" && asked != c.UserID {
		return "", errUserBinding
	}
	if c.UserID == "" {
		return "", errUserRequired
	}
	return c.UserID, nil
}

// parseRange reads from and to (RFC 3339); a missing to is the end of the
// current hour, a missing from is to minus def; the range must be
// positive and at most max.
func parseRange(fromS, toS string, now time.Time, def, max time.Duration) (from, to time.Time, err error) {
	to = now.Truncate(time.Hour).Add(time.Hour)
	if toS != "" {
		if to, err = time.Parse(time.RFC3339, toS); err != nil {
			return from, to, errInvalid("to must be an RFC 3339 time, e.g. 2026-11-23T00:00:00Z")
		}
	}
	from = to.Add(-def)
	if fromS != "" {
		if from, err = time.Parse(time.RFC3339, fromS); err != nil {
			return from, to, errInvalid("from must be an RFC 3339 time, e.g. 2026-11-22T00:00:00Z")
		}
	}
	switch {
	case !from.Before(to):
		return from, to, errInvalid("from must be before to")
	case to.Sub(from) > max:
		return from, to, errInvalid("the range from..to is at most " + max.String() + " at this granularity")
	}
	return from.UTC(), to.UTC(), nil
}

func parseAgentID(s string) (uuid.UUID, error) {
	if s == "" {
		return uuid.Nil, nil
	}
	id, err := uuid.Parse(s)
	if err != nil {
		return uuid.Nil, errInvalid("agent_id must be an agent's id")
	}
	return id, nil
}

// usageIn is GET /v1/usage.
type usageIn struct {
	Granularity string `query:"granularity" json:"-"`
	From        string `query:"from" json:"-"`
	To          string `query:"to" json:"-"`
	GroupBy     string `query:"group_by" json:"-"`
	AgentID     string `query:"agent_id" json:"-"`
	UserID      string `query:"user_id" json:"-"`
	Provider    string `query:"provider" json:"-"`
	Model       string `query:"model" json:"-"`
	APIKeyID    string `query:"api_key_id" json:"-"`
}

type usageOut struct {
	Granularity string               `json:"granularity"`
	From        time.Time            `json:"from"`
	To          time.Time            `json:"to"`
	GroupBy     string               `json:"group_by,omitempty"`
	Data        []gateway.UsagePoint `json:"data"`
}

func (s *Server) usage(ctx context.Context, c Caller, in usageIn) (usageOut, error) {
	hourly := false
	def, max := 30*24*time.Hour, maxDailyRange
	switch in.Granularity {
	case "", "day":
		in.Granularity = "day"
	case "hour":
		hourly, def, max = true, 24*time.Hour, maxHourlyRange
	default:
		return usageOut{}, errInvalid("granularity must be hour or day")
	}
	from, to, err := parseRange(in.From, in.To, s.d.Runs.Now(), def, max)
	if err != nil {
		return usageOut{}, err
	}
	user, err := ownUser(c, in.UserID)
	if err != nil {
		return usageOut{}, err
	}
	agent, err := parseAgentID(in.AgentID)
	if err != nil {
		return usageOut{}, err
	}
	var key uuid.UUID
	if in.APIKeyID != "" {
		if key, err = uuid.Parse(in.APIKeyID); err != nil {
			return usageOut{}, errInvalid("api_key_id must be a gateway API key's id")
		}
	}
	pts, err := s.d.Runs.UsageSeries(ctx, gateway.UsageQuery{
		From: from, To: to, Hourly: hourly, GroupBy: in.GroupBy,
		AgentID: agent, UserID: user, Provider: in.Provider, Model: in.Model, APIKeyID: key,
	})
	if err != nil {
		return usageOut{}, err
	}
	return usageOut{Granularity: in.Granularity, From: from, To: to, GroupBy: in.GroupBy, Data: nonNil(pts)}, nil
}

// summaryIn is GET /v1/usage/summary.
type summaryIn struct {
	Period string `query:"period" json:"-"`
	UserID string `query:"user_id" json:"-"`
}

type summaryOut struct {
	Period   string              `json:"period"`
	From     time.Time           `json:"from"`
	To       time.Time           `json:"to"`
	Current  gateway.UsageTotals `json:"current"`
	Previous gateway.UsageTotals `json:"previous"`
}

// summary compares the period that ends now with the one before it of
// the same length (today: since 00:00 UTC, against all of yesterday).
// Usage is kept by the hour: periods are whole hours (24h, 7d and 30d
// start at the hour).
func (s *Server) summary(ctx context.Context, c Caller, in summaryIn) (summaryOut, error) {
	now := s.d.Runs.Now().UTC()
	end := now.Truncate(time.Hour).Add(time.Hour) // the current hour counts
	var from, prevFrom time.Time
	switch in.Period {
	case "", "24h":
		in.Period = "24h"
		from, prevFrom = end.Add(-24*time.Hour), end.Add(-48*time.Hour)
	case "today":
		from = now.Truncate(24 * time.Hour)
		prevFrom = from.AddDate(0, 0, -1)
	case "7d":
		from, prevFrom = end.AddDate(0, 0, -7), end.AddDate(0, 0, -14)
	case "30d":
		from, prevFrom = end.AddDate(0, 0, -30), end.AddDate(0, 0, -60)
	default:
		return summaryOut{}, errInvalid("period must be 24h, today, 7d or 30d")
	}
	user, err := ownUser(c, in.UserID)
	if err != nil {
		return summaryOut{}, err
	}
	cur, err := s.d.Runs.UsageTotals(ctx, from, end, user)
	if err != nil {
		return summaryOut{}, err
	}
	prev, err := s.d.Runs.UsageTotals(ctx, prevFrom, from, user)
	if err != nil {
		return summaryOut{}, err
	}
	return summaryOut{Period: in.Period, From: from, To: end, Current: cur, Previous: prev}, nil
}

// tracesIn is GET /v1/traces.
type tracesIn struct {
	AgentID    string `query:"agent_id" json:"-"`
	UserID     string `query:"user_id" json:"-"`
	SessionKey string `query:"session_key" json:"-"`
	Status     string `query:"status" json:"-"`
	From       string `query:"from" json:"-"`
	To         string `query:"to" json:"-"`
	Limit      int    `query:"limit" json:"-"`
	Offset     int    `query:"offset" json:"-"`
}

type tracePage struct {
	Data   []traceView `json:"data"`
	Total  int         `json:"total"`
	Limit  int         `json:"limit"`
	Offset int         `json:"offset"`
}

// tokensView counts a trace's or a span's tokens: CacheRead and
// CacheWrite are the parts of Input read from and written to the
// provider's prompt cache, Reasoning the part of Output spent reasoning
// (0 where the provider does not report them).
type tokensView struct {
	Input      int64 `json:"input"`
	Output     int64 `json:"output"`
	Total      int64 `json:"total"`
	CacheRead  int64 `json:"cache_read,omitempty"`
	CacheWrite int64 `json:"cache_write,omitempty"`
	Reasoning  int64 `json:"reasoning,omitempty"`
}

// traceView is a trace as the API shows it; Spans only in GET
// /v1/traces/{id}, as a tree.
type traceView struct {
	ID            string      `json:"id"`
	AgentID       uuid.UUID   `json:"agent_id"`
	UserID        string      `json:"user_id"`
	SessionKey    string      `json:"session_key"`
	Name          string      `json:"name"`
	Channel       string      `json:"channel"`
	Provider      string      `json:"provider"`
	ProviderType  string      `json:"provider_type,omitempty"`
	Model         string      `json:"model"`
	Status        string      `json:"status"`
	Error         string      `json:"error"`
	StartTime     time.Time   `json:"start_time"`
	EndTime       time.Time   `json:"end_time"`
	DurationMs    int64       `json:"duration_ms"`
	InputPreview  string      `json:"input_preview"`
	OutputPreview string      `json:"output_preview"`
	Tokens        tokensView  `json:"tokens"`
	SpanCount     int         `json:"span_count"`
	Spans         []*spanView `json:"spans,omitempty"`
	// CostUSD is the run's cost (docs/pricing.md); PriceKnown is false
	// when a call's model had no price (absent: no call was priced, e.g.
	// a run recorded before prices). APIKeyID is the calling gateway API
	// key's (absent: none).
	CostUSD    float64   `json:"cost_usd"`
	PriceKnown *bool     `json:"price_known,omitempty"`
	APIKeyID   uuid.UUID `json:"api_key_id,omitzero"`
}

// spanView is one span and the spans it started.
type spanView struct {
	ID           string `json:"id"`
	ParentSpanID string `json:"parent_span_id"`
	SpanType     string `json:"span_type"`
	Name         string `json:"name"`
	Model        string `json:"model"`
	Provider     string `json:"provider"`
	ProviderType string `json:"provider_type,omitempty"`
	// Attempt is an LLM call's 1-based attempt within its turn's call
	// (retries and fallbacks); absent when not counted.
	Attempt       int         `json:"attempt,omitempty"`
	Tokens        tokensView  `json:"tokens"`
	Status        string      `json:"status"`
	Error         string      `json:"error"`
	StartTime     time.Time   `json:"start_time"`
	EndTime       time.Time   `json:"end_time"`
	DurationMs    int64       `json:"duration_ms"`
	InputPreview  string      `json:"input_preview"`
	OutputPreview string      `json:"output_preview"`
	Children      []*spanView `json:"children"`
	// CostUSD is an LLM call's cost; PriceKnown is false when its model
	// had no price, absent on spans that made no call.
	CostUSD    float64 `json:"cost_usd"`
	PriceKnown *bool   `json:"price_known,omitempty"`
}

func tokens(c gateway.TokenCounts) tokensView {
	return tokensView{Input: c.Prompt, Output: c.Completion, Total: c.Prompt + c.Completion,
		CacheRead: c.CacheRead, CacheWrite: c.CacheWrite, Reasoning: c.Reasoning}
}

func viewTrace(t gateway.Trace, spanCount int) traceView {
	return traceView{
		ID: t.ID, AgentID: t.AgentID, UserID: t.UserID, SessionKey: t.SessionKey, Name: t.Endpoint,
		Channel: t.Channel, Provider: t.Provider, ProviderType: t.ProviderType, Model: t.Model, Status: t.Status, Error: t.Error,
		StartTime: t.StartedAt, EndTime: t.StartedAt.Add(time.Duration(t.DurationMs) * time.Millisecond),
		DurationMs: t.DurationMs, InputPreview: t.InputPreview, OutputPreview: t.OutputPreview,
		Tokens: tokens(t.TokenCounts()), SpanCount: spanCount,
		CostUSD: t.CostUSD, PriceKnown: t.PriceKnown, APIKeyID: t.APIKeyID,
	}
}

// spanTree nests spans under their parents, in recorded order; a span
// whose parent is unknown is a root.
func spanTree(spans []gateway.Span) []*spanView {
	nodes := make(map[string]*spanView, len(spans))
	all := make([]*spanView, len(spans))
	for i, s := range spans {
		all[i] = &spanView{
			ID: s.ID, ParentSpanID: s.ParentID, SpanType: s.Kind, Name: s.Name, Model: s.Model, Provider: s.Provider,
			ProviderType: s.ProviderType, Attempt: s.Attempt, Tokens: tokens(s.Counts()), Status: s.Status, Error: s.Error,
			StartTime: s.StartedAt, EndTime: s.StartedAt.Add(time.Duration(s.DurationMs) * time.Millisecond),
			DurationMs: s.DurationMs, InputPreview: s.InputPreview, OutputPreview: s.OutputPreview, Children: []*spanView{},
			CostUSD: s.CostUSD, PriceKnown: s.PriceKnown,
		}
		nodes[s.ID] = all[i]
	}
	roots := []*spanView{}
	for _, n := range all {
		if p, ok := nodes[n.ParentSpanID]; ok && n.ParentSpanID != "" && p != n {
			p.Children = append(p.Children, n)
			continue
		}
		roots = append(roots, n)
	}
	return roots
}

func (s *Server) listTraces(ctx context.Context, c Caller, in tracesIn) (tracePage, error) {
	var err error
	if in.Limit, err = pageBounds(in.Limit, in.Offset); err != nil {
		return tracePage{}, err
	}
	f := gateway.TraceFilter{SessionKey: in.SessionKey, Status: in.Status, Limit: in.Limit, Offset: in.Offset, Spans: true}
	if f.UserID, err = ownUser(c, in.UserID); err != nil {
		return tracePage{}, err
	}
	if f.AgentID, err = parseAgentID(in.AgentID); err != nil {
		return tracePage{}, err
	}
	if f.From, f.To, err = parseTimes(in.From, in.To); err != nil {
		return tracePage{}, err
	}
	p, err := s.d.Runs.TracePage(ctx, f)
	if err != nil {
		return tracePage{}, err
	}
	out := tracePage{Data: make([]traceView, len(p.Traces)), Total: p.Total, Limit: in.Limit, Offset: in.Offset}
	for i, t := range p.Traces {
		out.Data[i] = viewTrace(t, len(t.Spans))
	}
	return out, nil
}

func (s *Server) getTrace(ctx context.Context, c Caller, in idIn) (traceView, error) {
	t, err := s.d.Runs.Trace(ctx, in.ID)
	if err != nil {
		return traceView{}, err
	}
	if !c.principal().MayRead(t.UserID) {
		return traceView{}, errNotFound // another user's: ids do not leak
	}
	v := viewTrace(t, len(t.Spans))
	v.Spans = spanTree(t.Spans)
	return v, nil
}
