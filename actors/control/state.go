package control

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/google/uuid"

	"gatehouse/actors"
)

// state is the domain's durable state. apply is its only writer; it is
// owned by the Control before Start and by its actor after.
type state struct {
	tokens   map[uuid.UUID]*tokenRec
	byHash   map[tokenHash]uuid.UUID
	services map[string]*serviceRec
	keySvcs  map[uuid.UUID][]string
}

func newState() *state {
	return &state{
		tokens: map[uuid.UUID]*tokenRec{}, byHash: map[tokenHash]uuid.UUID{},
		services: map[string]*serviceRec{}, keySvcs: map[uuid.UUID][]string{},
	}
}

// apply applies one event. Every event is a full-state upsert or a
// delete, so applying one the state already reflects changes nothing;
// the one exception is a token's last-use save, which applies only to a
// token still held.
func (s *state) apply(e event) error {
	switch e.kind {
	case kindToken:
		id, err := uuid.Parse(e.id)
		if err != nil {
			return fmt.Errorf("token id %q: %w", e.id, actors.ErrCorrupt)
		}
		var t tokenRec
		if e.data != nil {
			if err := json.Unmarshal(e.data, &t); err != nil || t.ID != id {
				return fmt.Errorf("token %s: %w", e.id, actors.ErrCorrupt) // before any change
			}
		}
		old, ok := s.tokens[id]
		if !ok && e.data != nil && t.LastUsed != 0 {
			// A save with a use is a use of a token already held (a
			// new token has none): another node saved it before it
			// saw the token's revocation, which the log put first.
			// A use never brings a revoked token back (issue 31).
			return nil
		}
		if ok {
			delete(s.byHash, old.Hash)
			delete(s.tokens, id)
		}
		if e.data == nil {
			return nil
		}
		s.tokens[id] = &t
		s.byHash[t.Hash] = id
	case kindService:
		if e.data == nil {
			delete(s.services, e.id)
			return nil
		}
		var sv serviceRec
		if err := json.Unmarshal(e.data, &sv); err != nil || sv.Name != e.id {
			return fmt.Errorf("service %s: %w", e.id, actors.ErrCorrupt)
		}
		s.services[sv.Name] = &sv
	case kindKeyServices:
		id, err := uuid.Parse(e.id)
		if err != nil {
			return fmt.Errorf("key id %q: %w", e.id, actors.ErrCorrupt)
		}
		if e.data == nil {
			delete(s.keySvcs, id)
			return nil
		}
		var k keyServicesRec
		if err := json.Unmarshal(e.data, &k); err != nil || k.KeyID != id {
			return fmt.Errorf("key services %s: %w", e.id, actors.ErrCorrupt)
		}
		s.keySvcs[id] = k.Services
	default:
		return fmt.Errorf("control: unknown kind %q: %w", e.kind, actors.ErrCorrupt)
	}
	return nil
}

// usable reports whether t (nil: no such token) may be used at now:
// ErrTokenInvalid if it or a token up its chain of parents is gone,
// ErrTokenExpired if one of them has expired. The chain is at most as
// long as there are tokens (a corrupt cycle ends there).
func (s *state) usable(t *tokenRec, now int64) error {
	for range len(s.tokens) + 1 {
		switch {
		case t == nil:
			return ErrTokenInvalid
		case t.ExpiresAt != 0 && t.ExpiresAt <= now:
			return ErrTokenExpired
		case t.Parent == uuid.Nil:
			return nil
		}
		t = s.tokens[t.Parent]
	}
	return ErrTokenInvalid
}

// expiry is the time t stops working, Unix seconds (0: never): the
// earliest expiry on its chain of parents.
func (s *state) expiry(t *tokenRec) int64 {
	exp := int64(0)
	for range len(s.tokens) + 1 {
		if t == nil {
			break
		}
		if t.ExpiresAt != 0 && (exp == 0 || t.ExpiresAt < exp) {
			exp = t.ExpiresAt
		}
		t = s.tokens[t.Parent]
	}
	return exp
}

// lineage returns the ids of the tokens minted by the tokens in roots,
// and by those, in turn, without roots themselves; sorted, so that the
// records deleting them are the same on every node.
func (s *state) lineage(roots ...uuid.UUID) []uuid.UUID {
	children := map[uuid.UUID][]uuid.UUID{}
	for id, t := range s.tokens {
		if t.Parent != uuid.Nil {
			children[t.Parent] = append(children[t.Parent], id)
		}
	}
	seen := map[uuid.UUID]bool{}
	for _, r := range roots {
		seen[r] = true
	}
	var out []uuid.UUID
	for queue := slices.Clone(roots); len(queue) > 0; queue = queue[1:] {
		for _, c := range children[queue[0]] {
			if !seen[c] {
				seen[c] = true
				out = append(out, c)
				queue = append(queue, c)
			}
		}
	}
	slices.SortFunc(out, func(a, b uuid.UUID) int { return bytes.Compare(a[:], b[:]) })
	return out
}

// sectionJSON is the snapshot section (version 1): every entity, sorted,
// so equal states encode to equal bytes.
type sectionJSON struct {
	V           int              `json:"v"`
	Tokens      []tokenRec       `json:"tokens"`
	Services    []serviceRec     `json:"services"`
	KeyServices []keyServicesRec `json:"key_services"`
}

func (s *state) encode() []byte {
	sec := sectionJSON{V: dataVersion, Tokens: []tokenRec{}, Services: []serviceRec{}, KeyServices: []keyServicesRec{}}
	for _, t := range s.tokens {
		sec.Tokens = append(sec.Tokens, *t)
	}
	slices.SortFunc(sec.Tokens, func(a, b tokenRec) int { return bytes.Compare(a.ID[:], b.ID[:]) })
	for _, sv := range s.services {
		sec.Services = append(sec.Services, *sv)
	}
	slices.SortFunc(sec.Services, func(a, b serviceRec) int { return strings.Compare(a.Name, b.Name) })
	for id, l := range s.keySvcs {
		sec.KeyServices = append(sec.KeyServices, keyServicesRec{KeyID: id, Services: l})
	}
	slices.SortFunc(sec.KeyServices, func(a, b keyServicesRec) int { return bytes.Compare(a.KeyID[:], b.KeyID[:]) })
	b, err := json.Marshal(sec)
	if err != nil {
		panic("control: marshal section") // plain structs: cannot fail
	}
	return b
}

func decodeSection(b []byte) (*state, error) {
	var sec sectionJSON
	if err := json.Unmarshal(b, &sec); err != nil {
		return nil, fmt.Errorf("control section: %w: %w", actors.ErrCorrupt, err)
	}
	if sec.V > dataVersion {
		return nil, fmt.Errorf("control section version %d is newer than this build's: %w", sec.V, actors.ErrCorrupt)
	}
	s := newState()
	for i := range sec.Tokens {
		t := sec.Tokens[i]
		s.tokens[t.ID] = &t
		s.byHash[t.Hash] = t.ID
	}
	for i := range sec.Services {
		sv := sec.Services[i]
		s.services[sv.Name] = &sv
	}
	for _, k := range sec.KeyServices {
		s.keySvcs[k.KeyID] = k.Services
	}
	return s, nil
}
