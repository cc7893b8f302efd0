package gateway

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"gatehouse/actors/gateway/pricing"
)

// TraceFilter selects traces; zero fields match everything.
type TraceFilter struct {
	AgentID    uuid.UUID
	UserID     string
	SessionKey string
	Status     string
	From, To   time.Time // started in [From, To)
	Day        string    // 2006-01-02, UTC
	Limit      int       // 0: 100
	Offset     int
	Spans      bool // include every trace's spans (lists leave them out)
}

func (f TraceFilter) matches(t *runRec) bool {
	switch {
	case f.AgentID != uuid.Nil && t.AgentID != f.AgentID,
		f.UserID != "" && t.UserID != f.UserID,
		f.SessionKey != "" && t.SessionKey != f.SessionKey,
		f.Status != "" && t.Status != f.Status,
		!f.From.IsZero() && t.StartedAt.Before(f.From),
		!f.To.IsZero() && !t.StartedAt.Before(f.To),
		f.Day != "" && t.StartedAt.UTC().Format(time.DateOnly) != f.Day:
		return false
	}
	return true
}

// TracePage is one page of a trace list.
type TracePage struct {
	Traces []Trace
	Total  int // traces matching the filter, over every page
}

// Usage groupings (UsageQuery.GroupBy).
const (
	GroupNone     = ""
	GroupAgent    = "agent"
	GroupUser     = "user"
	GroupProvider = "provider"
	GroupModel    = "model"
	GroupAPIKey   = "api_key" // the calling gateway API key's id ("" for runs without one)
)

// UsageQuery selects usage: runs that started in [From, To) (zero: open),
// by hour or by UTC day, optionally grouped and filtered.
type UsageQuery struct {
	From, To time.Time
	Hourly   bool
	GroupBy  string
	AgentID  uuid.UUID
	UserID   string
	Provider string
	Model    string
	APIKeyID uuid.UUID // runs called with this gateway API key
}

func (q UsageQuery) matches(u *usageRec) bool {
	return (q.AgentID == uuid.Nil || u.AgentID == q.AgentID) && (q.UserID == "" || u.UserID == q.UserID) &&
		(q.Provider == "" || u.Provider == q.Provider) && (q.Model == "" || u.Model == q.Model) &&
		(q.APIKeyID == uuid.Nil || u.APIKeyID == q.APIKeyID)
}

// UsagePoint is the usage of one time bucket (and group).
type UsagePoint struct {
	Bucket       time.Time `json:"bucket"`
	Group        string    `json:"group,omitempty"`
	Runs         int64     `json:"runs"`
	InputTokens  int64     `json:"input_tokens"`
	OutputTokens int64     `json:"output_tokens"`
	TotalTokens  int64     `json:"total_tokens"`
	Errors       int64     `json:"errors"`
	LLMCalls     int64     `json:"llm_calls"`
	ToolCalls    int64     `json:"tool_calls"`
	// The parts of InputTokens read from and written to the providers'
	// prompt caches, and of OutputTokens spent reasoning; absent when 0
	// (none, or the providers do not report them).
	CacheReadTokens  int64 `json:"cache_read_tokens,omitempty"`
	CacheWriteTokens int64 `json:"cache_write_tokens,omitempty"`
	ReasoningTokens  int64 `json:"reasoning_tokens,omitempty"`
	// CostNano is the runs' cost in nano-USD (docs/pricing.md), CostUSD
	// shows it; UnpricedCalls counts calls to models without a price
	// (they cost 0).
	CostNano      int64   `json:"-"`
	CostUSD       float64 `json:"cost_usd"`
	UnpricedCalls int64   `json:"unpriced_calls,omitempty"`
}

// UsageTotals sums the usage of a period.
type UsageTotals struct {
	Requests      int64 `json:"requests"`
	InputTokens   int64 `json:"input_tokens"`
	OutputTokens  int64 `json:"output_tokens"`
	Errors        int64 `json:"errors"`
	UniqueUsers   int64 `json:"unique_users"`
	LLMCalls      int64 `json:"llm_calls"`
	ToolCalls     int64 `json:"tool_calls"`
	AvgDurationMs int64 `json:"avg_duration_ms"`
	// Parts of InputTokens and OutputTokens, as in UsagePoint.
	CacheReadTokens  int64 `json:"cache_read_tokens,omitempty"`
	CacheWriteTokens int64 `json:"cache_write_tokens,omitempty"`
	ReasoningTokens  int64 `json:"reasoning_tokens,omitempty"`
	// Cost and unpriced calls, as in UsagePoint.
	CostNano      int64   `json:"-"`
	CostUSD       float64 `json:"cost_usd"`
	UnpricedCalls int64   `json:"unpriced_calls,omitempty"`
}

// UsageSeries returns q's usage as points ordered by bucket, then group;
// buckets without runs are left out. ErrInvalid for an unknown GroupBy.
func (g *Gateway) UsageSeries(ctx context.Context, q UsageQuery) ([]UsagePoint, error) {
	switch q.GroupBy {
	case GroupNone, GroupAgent, GroupUser, GroupProvider, GroupModel, GroupAPIKey:
	default:
		return nil, fmt.Errorf("%w: group_by must be agent, user, provider, model or api_key", ErrInvalid)
	}
	rows, err := g.usageRows(ctx, q)
	if err != nil {
		return nil, err
	}
	type key struct {
		bucket string
		group  string
	}
	points := map[key]*UsagePoint{}
	for _, u := range rows {
		b := u.Hour
		if !q.Hourly {
			b = u.Hour[:len(time.DateOnly)]
		}
		k := key{b, groupOf(u, q.GroupBy)}
		p := points[k]
		if p == nil {
			p = &UsagePoint{Bucket: bucketTime(b), Group: k.group}
			points[k] = p
		}
		p.Runs += u.Runs
		p.InputTokens += u.PromptTokens
		p.OutputTokens += u.CompletionTokens
		p.TotalTokens += u.PromptTokens + u.CompletionTokens
		p.Errors += u.Errors
		p.LLMCalls += u.LLMCalls
		p.ToolCalls += u.ToolCalls
		p.CacheReadTokens += u.CacheReadTokens
		p.CacheWriteTokens += u.CacheWriteTokens
		p.ReasoningTokens += u.ReasoningTokens
		p.CostNano = satAdd(p.CostNano, u.CostNano)
		p.UnpricedCalls += u.UnpricedCalls
	}
	out := make([]UsagePoint, 0, len(points))
	for _, p := range points {
		p.CostUSD = pricing.Nano(p.CostNano).USD()
		out = append(out, *p)
	}
	slices.SortFunc(out, func(a, b UsagePoint) int {
		return cmp.Or(a.Bucket.Compare(b.Bucket), strings.Compare(a.Group, b.Group))
	})
	return out, nil
}

// UsageTotals sums the usage of runs that started in [from, to) (to the
// hour), for one user ("" for all).
func (g *Gateway) UsageTotals(ctx context.Context, from, to time.Time, user string) (UsageTotals, error) {
	rows, err := g.usageRows(ctx, UsageQuery{From: from, To: to, UserID: user})
	if err != nil {
		return UsageTotals{}, err
	}
	var t UsageTotals
	var dur int64
	users := map[string]bool{}
	for _, u := range rows {
		t.Requests += u.Runs
		t.InputTokens += u.PromptTokens
		t.OutputTokens += u.CompletionTokens
		t.Errors += u.Errors
		t.LLMCalls += u.LLMCalls
		t.ToolCalls += u.ToolCalls
		t.CacheReadTokens += u.CacheReadTokens
		t.CacheWriteTokens += u.CacheWriteTokens
		t.ReasoningTokens += u.ReasoningTokens
		t.CostNano = satAdd(t.CostNano, u.CostNano)
		t.UnpricedCalls += u.UnpricedCalls
		dur += u.DurationMs
		if u.UserID != "" {
			users[u.UserID] = true
		}
	}
	t.UniqueUsers = int64(len(users))
	t.CostUSD = pricing.Nano(t.CostNano).USD()
	if t.Requests > 0 {
		t.AvgDurationMs = dur / t.Requests
	}
	return t, nil
}

// Usage returns usage rows by UTC day, agent and user, for one agent
// and/or user (zero: all).
func (g *Gateway) Usage(ctx context.Context, agent uuid.UUID, user string) ([]UsageRow, error) {
	rows, err := g.usageRows(ctx, UsageQuery{AgentID: agent, UserID: user})
	if err != nil {
		return nil, err
	}
	type key struct {
		day   string
		agent uuid.UUID
		user  string
	}
	days := map[key]*UsageRow{}
	for _, u := range rows {
		k := key{u.Hour[:len(time.DateOnly)], u.AgentID, u.UserID}
		r := days[k]
		if r == nil {
			r = &UsageRow{Day: k.day, AgentID: u.AgentID, UserID: u.UserID}
			days[k] = r
		}
		r.Runs += u.Runs
		r.PromptTokens += u.PromptTokens
		r.CompletionTokens += u.CompletionTokens
		r.CacheReadTokens += u.CacheReadTokens
		r.CacheWriteTokens += u.CacheWriteTokens
		r.ReasoningTokens += u.ReasoningTokens
		r.CostNano = satAdd(r.CostNano, u.CostNano)
	}
	out := make([]UsageRow, 0, len(days))
	for _, r := range days {
		r.CostUSD = pricing.Nano(r.CostNano).USD()
		out = append(out, *r)
	}
	slices.SortFunc(out, func(a, b UsageRow) int {
		return cmp.Or(strings.Compare(a.Day, b.Day), strings.Compare(a.AgentID.String(), b.AgentID.String()), strings.Compare(a.UserID, b.UserID))
	})
	return out, nil
}

func groupOf(u usageRec, by string) string {
	switch by {
	case GroupAgent:
		return u.AgentID.String()
	case GroupUser:
		return u.UserID
	case GroupProvider:
		return u.Provider
	case GroupModel:
		return u.Model
	case GroupAPIKey:
		if u.APIKeyID == uuid.Nil {
			return ""
		}
		return u.APIKeyID.String()
	}
	return ""
}

// bucketTime parses an hour ("2006-01-02T15") or a day.
func bucketTime(b string) time.Time {
	layout := hourLayout
	if len(b) == len(time.DateOnly) {
		layout = time.DateOnly
	}
	t, _ := time.Parse(layout, b)
	return t
}

// Now is the gateway's clock.
func (g *Gateway) Now() time.Time { return g.clock.Now() }
