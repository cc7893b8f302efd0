package gateway

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"gatehouse/actors"
)

// sectionVersion is the snapshot section layout this build writes: 3 has
// hourly usage rows by agent, user, provider and model; 2 had day rows by
// agent and user (restored as the day's first hour), otherwise the same.
const sectionVersion = 3

// sectionV2 is the gateway's snapshot section (versions 2 and 3): every
// entity as the payload of its entitySaved record, sorted by kind then id,
// and the runs part. Equal states encode to equal bytes (the property test
// compares states through it).
type sectionV2 struct {
	Version  int          `json:"version"`
	Entities []entityJSON `json:"entities"`
	Runs     runsJSON     `json:"runs"`
}

type runsJSON struct {
	Seq    uint64     `json:"seq"`    // highest run record reflected
	Traces []*runRec  `json:"traces"` // oldest first
	Usage  []usageRec `json:"usage"`  // by hour, agent, user, provider, model
	// Instances (agent, user pairs that ran) by agent, user; absent in
	// sections written before instances.
	Instances []instanceRec `json:"instances,omitempty"`
}

// sectionV1 is the layout of builds before v2: the API types' JSON, whose
// names the record structs kept.
type sectionV1 struct {
	Keys      []json.RawMessage `json:"keys"`
	Providers []json.RawMessage `json:"providers"`
	Agents    []json.RawMessage `json:"agents"`
	RunsSeq   uint64            `json:"runs_seq"`
	Traces    []*runRec         `json:"traces"`
	Usage     []usageRec        `json:"usage"`
}

// encodeSection encodes a state given as its entities (any order; sorted
// in place) and its runs.
func encodeSection(ents []entity, runs runsImage) []byte {
	slices.SortFunc(ents, cmpEntity)
	s := sectionV2{
		Version:  sectionVersion,
		Entities: make([]entityJSON, len(ents)),
		Runs:     runsJSON{Seq: runs.seq, Traces: runs.traces, Usage: runs.usage, Instances: runs.instances},
	}
	for i, e := range ents {
		s.Entities[i] = encodeEntity(e)
	}
	s.Runs.Traces, s.Runs.Usage = orEmpty(s.Runs.Traces), orEmpty(s.Runs.Usage)
	return mustJSON(s)
}

func cmpEntity(a, b entity) int {
	ka, ia := a.ref()
	kb, ib := b.ref()
	if c := strings.Compare(string(ka), string(kb)); c != 0 {
		return c
	}
	return bytes.Compare(ia[:], ib[:])
}

// encode is st's snapshot section (restore and tests; the running gateway
// gathers the same from its actors in Capture).
func (st *state) encode() []byte { return encodeSection(st.entities(nil), st.runs.image()) }

// restoreSection fills an empty st from a section of any version this
// build reads; errors wrap actors.ErrCorrupt.
func restoreSection(b []byte, st *state) error {
	var head struct {
		Version int `json:"version"`
	}
	err := json.Unmarshal(b, &head)
	if err == nil {
		switch head.Version {
		case 1:
			err = restoreV1(b, st)
		case 2, 3:
			err = restoreV2(b, st)
		default:
			err = fmt.Errorf("version %d unsupported", head.Version)
		}
	}
	if err != nil {
		return fmt.Errorf("gateway section: %w: %w", actors.ErrCorrupt, err)
	}
	return nil
}

func restoreV2(b []byte, st *state) error {
	var s sectionV2
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	// Audit entries last: an API key's entry goes to its key's shard,
	// which is known once the key is placed (kinds sort "activity" first).
	var audits []entity
	for _, e := range s.Entities {
		ent, err := e.decode()
		if err != nil {
			return err
		}
		if _, ok := ent.(*activityRec); ok {
			audits = append(audits, ent)
			continue
		}
		st.apply(0, entitySaved{ent})
	}
	for _, ent := range audits {
		st.apply(0, entitySaved{ent})
	}
	return st.runs.restoreFrom(s.Runs.Seq, s.Runs.Traces, s.Runs.Usage, s.Runs.Instances)
}

func restoreV1(b []byte, st *state) error {
	var s sectionV1
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	for _, g := range []struct {
		k    kind
		ents []json.RawMessage
	}{{kindAPIKey, s.Keys}, {kindProvider, s.Providers}, {kindAgent, s.Agents}} {
		for _, data := range g.ents {
			ent, err := decodeEntity(g.k, 1, data)
			if err != nil {
				return err
			}
			st.apply(0, entitySaved{ent})
		}
	}
	return st.runs.restoreFrom(s.RunsSeq, s.Traces, s.Usage, nil)
}

func (rs *runState) restoreFrom(seq uint64, traces []*runRec, usage []usageRec, instances []instanceRec) error {
	if slices.Contains(traces, nil) {
		return fmt.Errorf("null trace")
	}
	if instances == nil {
		instances = instancesOf(traces) // a section from before instances: the traces it kept
	}
	rs.restore(runsImage{seq: seq, traces: traces, usage: usage, instances: instances})
	return nil
}

// instancesOf derives the instances the traces show.
func instancesOf(traces []*runRec) []instanceRec {
	rs := newRunState(len(traces)+1, 0, 1<<20)
	for _, t := range traces {
		rs.apply(0, runRecorded{t})
	}
	return rs.image().instances
}
