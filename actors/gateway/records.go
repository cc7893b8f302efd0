package gateway

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"

	"gatehouse/actors"
	"gatehouse/wal"
)

// WAL record types of the gateway (extensions own 64..255). The numbers are
// part of the on-disk format: never reuse or renumber one.
const (
	recAPIKeyPut   wal.Type = 64 // JSON APIKey: full state (create or revoke)
	recProviderPut wal.Type = 65 // JSON Provider: full state, credential sealed
	recProviderDel wal.Type = 66 // 16-byte provider id
	recAgentPut    wal.Type = 67 // JSON Agent: full state
	recAgentDel    wal.Type = 68 // 16-byte agent id
	recRunRecorded wal.Type = 69 // JSON Trace; usage is derived from it
)

func owns(t wal.Type) bool { return t >= recAPIKeyPut && t <= recRunRecorded }

func jsonRecord(t wal.Type, v any) wal.Record {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("gateway: marshal record type %d: %v", t, err)) // plain structs: cannot fail
	}
	return wal.Record{Type: t, Data: b}
}

func idRecord(t wal.Type, id uuid.UUID) wal.Record {
	return wal.Record{Type: t, Data: append([]byte(nil), id[:]...)}
}

// state is the gateway's whole durable state. apply is pure and
// deterministic: it serves replay (before Start) and the actors alike.
type state struct {
	keys      map[uuid.UUID]*APIKey
	providers map[uuid.UUID]*Provider
	agents    map[uuid.UUID]*Agent
	runs      runState
}

func newState(maxTraces, usageDays int) *state {
	return &state{
		keys: map[uuid.UUID]*APIKey{}, providers: map[uuid.UUID]*Provider{}, agents: map[uuid.UUID]*Agent{},
		runs: newRunState(maxTraces, usageDays),
	}
}

// apply applies one record; seq is its WAL index (run records at or below
// the runs watermark are already reflected and skipped).
func (st *state) apply(seq uint64, r wal.Record) error {
	switch r.Type {
	case recAPIKeyPut:
		var k APIKey
		if err := json.Unmarshal(r.Data, &k); err != nil {
			return fmt.Errorf("api key record: %w", actors.ErrCorrupt)
		}
		st.keys[k.ID] = &k
	case recProviderPut:
		var p Provider
		if err := json.Unmarshal(r.Data, &p); err != nil {
			return fmt.Errorf("provider record: %w", actors.ErrCorrupt)
		}
		st.providers[p.ID] = &p
	case recAgentPut:
		var a Agent
		if err := json.Unmarshal(r.Data, &a); err != nil {
			return fmt.Errorf("agent record: %w", actors.ErrCorrupt)
		}
		st.agents[a.ID] = &a
	case recProviderDel, recAgentDel:
		id, err := uuid.FromBytes(r.Data)
		if err != nil {
			return fmt.Errorf("delete record: %w", actors.ErrCorrupt)
		}
		delete(st.providers, id)
		delete(st.agents, id)
	case recRunRecorded:
		var t Trace
		if err := json.Unmarshal(r.Data, &t); err != nil {
			return fmt.Errorf("run record: %w", actors.ErrCorrupt)
		}
		st.runs.apply(seq, t)
	default:
		return fmt.Errorf("gateway: unknown record type %d: %w", r.Type, actors.ErrCorrupt)
	}
	return nil
}

// section is the snapshot encoding of state (JSON, version 1).
type section struct {
	Version   int        `json:"version"`
	Keys      []APIKey   `json:"keys"`
	Providers []Provider `json:"providers"`
	Agents    []Agent    `json:"agents"`
	RunsSeq   uint64     `json:"runs_seq"`
	Traces    []Trace    `json:"traces"`
	Usage     []UsageRow `json:"usage"`
}

func decodeSection(b []byte, st *state) error {
	var s section
	if err := json.Unmarshal(b, &s); err != nil || s.Version != 1 {
		return fmt.Errorf("gateway section: %w", actors.ErrCorrupt)
	}
	for i := range s.Keys {
		st.keys[s.Keys[i].ID] = &s.Keys[i]
	}
	for i := range s.Providers {
		st.providers[s.Providers[i].ID] = &s.Providers[i]
	}
	for i := range s.Agents {
		st.agents[s.Agents[i].ID] = &s.Agents[i]
	}
	st.runs.seq = s.RunsSeq
	st.runs.traces = s.Traces
	for i := range s.Usage {
		u := s.Usage[i]
		st.runs.usage[usageKey{u.Day, u.AgentID, u.UserID}] = &u
		st.runs.newestDay = max(st.runs.newestDay, u.Day)
	}
	return nil
}

// runState holds the bounded traces and the usage per agent/user/day.
type runState struct {
	seq       uint64 // highest run record reflected
	maxTraces int
	usageDays int
	traces    []Trace // oldest first, at most maxTraces
	usage     map[usageKey]*UsageRow
	newestDay string
}

type usageKey struct {
	day   string
	agent uuid.UUID
	user  string
}

func newRunState(maxTraces, usageDays int) runState {
	return runState{maxTraces: maxTraces, usageDays: usageDays, usage: map[usageKey]*UsageRow{}}
}

// apply records t and its usage unless seq is already reflected. Retention
// depends only on the records (the newest day seen), so replay is exact.
func (rs *runState) apply(seq uint64, t Trace) {
	if seq != 0 && seq <= rs.seq {
		return
	}
	if seq != 0 {
		rs.seq = seq
	}
	rs.traces = append(rs.traces, t)
	if over := len(rs.traces) - rs.maxTraces; over > 0 {
		rs.traces = slices.Delete(rs.traces, 0, over)
	}
	day := t.StartedAt.UTC().Format(time.DateOnly)
	k := usageKey{day, t.AgentID, t.UserID}
	u := rs.usage[k]
	if u == nil {
		u = &UsageRow{Day: day, AgentID: t.AgentID, UserID: t.UserID}
		rs.usage[k] = u
	}
	u.Runs++
	for _, sp := range t.Spans {
		u.PromptTokens += sp.PromptTokens
		u.CompletionTokens += sp.CompletionTokens
	}
	if day > rs.newestDay {
		rs.newestDay = day
		rs.prune()
	}
}

func (rs *runState) prune() {
	newest, err := time.Parse(time.DateOnly, rs.newestDay)
	if err != nil {
		return
	}
	cut := newest.AddDate(0, 0, -rs.usageDays+1).Format(time.DateOnly)
	for k := range rs.usage {
		if k.day < cut {
			delete(rs.usage, k)
		}
	}
}
