package control

import (
	"encoding/hex"
	"encoding/json"
	"fmt"

	"github.com/google/uuid"

	"gatehouse/actors"
	"gatehouse/wal"
)

// WAL record types (each domain owns the types its Owns claims: accounts
// 2..4, keys 10..16, the gateway 64..75, control 200..201). Never reuse or renumber one.
const (
	recSaved   wal.Type = 200 // JSON savedJSON: one entity's full state
	recDeleted wal.Type = 201 // JSON deletedJSON: one entity removed
)

// owns reports whether t is one of the domain's record types.
func owns(t wal.Type) bool { return t == recSaved || t == recDeleted }

// kind names an entity kind in records and snapshots; never rename one.
type kind string

const (
	kindToken       kind = "token"
	kindService     kind = "service"
	kindKeyServices kind = "key_services"
)

// dataVersion is the version of the entity layouts this build writes.
const dataVersion = 1

// tokenRec is the durable form of an access token.
type tokenRec struct {
	ID        uuid.UUID `json:"id"`
	UserID    uuid.UUID `json:"user_id"`
	Name      string    `json:"name"`
	Scopes    []Scope   `json:"scopes"`
	Hash      tokenHash `json:"hash"` // SHA-256 of the full token, hex
	CreatedAt int64     `json:"created_at"`
	ExpiresAt int64     `json:"expires_at,omitempty"` // 0: never
	LastUsed  int64     `json:"last_used_at,omitempty"`
	// Parent is the token that minted this one (absent: a session did,
	// or the token predates the field). A token is usable only while its
	// parent is, and never expires after it.
	Parent uuid.UUID `json:"parent,omitzero"`
}

// serviceRec is the durable form of a service; header values are sealed.
type serviceRec struct {
	Name        string            `json:"name"`
	Upstream    string            `json:"upstream"`
	Headers     map[string][]byte `json:"headers,omitempty"` // name → sealed value
	TimeoutMs   int64             `json:"timeout_ms,omitempty"`
	MaxConns    int               `json:"max_conns,omitempty"`
	Enabled     bool              `json:"enabled"`
	Description string            `json:"description,omitempty"`
	CreatedAt   int64             `json:"created_at"`
	UpdatedAt   int64             `json:"updated_at"`
}

// tokenHash is a token's SHA-256, hex in JSON.
type tokenHash [32]byte

func (h tokenHash) MarshalText() ([]byte, error) { return []byte(hex.EncodeToString(h[:])), nil }

func (h *tokenHash) UnmarshalText(b []byte) error {
	if len(b) != 64 {
		return fmt.Errorf("token hash: %d characters: %w", len(b), actors.ErrCorrupt)
	}
	_, err := hex.Decode(h[:], b)
	return err
}

// keyServicesRec limits one key to some services.
type keyServicesRec struct {
	KeyID    uuid.UUID `json:"key_id"`
	Services []string  `json:"services"`
}

// event is one change: an entity saved (full state) or deleted.
type event struct {
	kind kind
	id   string          // token id, service name or key id
	data json.RawMessage // nil for a delete
}

type savedJSON struct {
	Kind kind            `json:"kind"`
	V    int             `json:"v"`
	ID   string          `json:"id"`
	Data json.RawMessage `json:"data"`
}

type deletedJSON struct {
	Kind kind   `json:"kind"`
	ID   string `json:"id"`
}

func saved(k kind, id string, v any) event {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("control: marshal %s: %v", k, err)) // plain structs: cannot fail
	}
	return event{kind: k, id: id, data: b}
}

func deleted(k kind, id string) event { return event{kind: k, id: id} }

func (e event) record() wal.Record {
	var b []byte
	var err error
	typ := recSaved
	if e.data == nil {
		typ = recDeleted
		b, err = json.Marshal(deletedJSON{Kind: e.kind, ID: e.id})
	} else {
		b, err = json.Marshal(savedJSON{Kind: e.kind, V: dataVersion, ID: e.id, Data: e.data})
	}
	if err != nil {
		panic(fmt.Sprintf("control: marshal record: %v", err))
	}
	return wal.Record{Type: typ, Data: b}
}

// decodeEvent decodes one of the domain's records.
func decodeEvent(r wal.Record) (event, error) {
	switch r.Type {
	case recSaved:
		var s savedJSON
		if err := json.Unmarshal(r.Data, &s); err != nil {
			return event{}, fmt.Errorf("control record: %w: %w", actors.ErrCorrupt, err)
		}
		if s.V > dataVersion {
			return event{}, fmt.Errorf("control record version %d is newer than this build's: %w", s.V, actors.ErrCorrupt)
		}
		if len(s.Data) == 0 || string(s.Data) == "null" {
			return event{}, fmt.Errorf("control record without data: %w", actors.ErrCorrupt)
		}
		return event{kind: s.Kind, id: s.ID, data: s.Data}, nil
	case recDeleted:
		var d deletedJSON
		if err := json.Unmarshal(r.Data, &d); err != nil {
			return event{}, fmt.Errorf("control record: %w: %w", actors.ErrCorrupt, err)
		}
		return event{kind: d.Kind, id: d.ID}, nil
	}
	return event{}, fmt.Errorf("control: record type %d is not ours: %w", r.Type, actors.ErrCorrupt)
}
