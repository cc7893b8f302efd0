package gateway

import (
	"maps"
	"slices"

	"github.com/google/uuid"
)

// table holds the entities of one kind by id, with an optional index of a
// unique name (provider name, agent_key, …): the building block of a part.
// It only stores: uniqueness is checked by the actor before the event.
type table[P interface {
	comparable
	entity
}] struct {
	rows  map[uuid.UUID]P
	names map[string]uuid.UUID
	name  func(P) string // nil: no name index
	// shared: a published view holds rows and names, so the next write
	// copies them first (copy on write; see registryPart.freeze).
	shared bool
}

// own makes rows and names the table's own before a write.
func (t *table[P]) own() {
	if t.shared {
		t.rows, t.names, t.shared = maps.Clone(t.rows), maps.Clone(t.names), false
	}
}

func (t *table[P]) share() { t.shared = true }

func newTable[P interface {
	comparable
	entity
}](name func(P) string) table[P] {
	return table[P]{rows: map[uuid.UUID]P{}, names: map[string]uuid.UUID{}, name: name}
}

// save stores e under its id and returns the entity it replaced, if any.
func (t *table[P]) save(e P) (old P, ok bool) {
	t.own()
	_, id := e.ref()
	old, ok = t.drop(id)
	t.rows[id] = e
	if t.name != nil {
		t.names[t.name(e)] = id
	}
	return old, ok
}

// drop removes id and returns what it held, if anything.
func (t *table[P]) drop(id uuid.UUID) (old P, ok bool) {
	t.own()
	old, ok = t.rows[id]
	if !ok {
		return old, false
	}
	if t.name != nil && t.names[t.name(old)] == id {
		delete(t.names, t.name(old))
	}
	delete(t.rows, id)
	return old, true
}

// get finds an entity by id, else by name (a name may look like an id).
func (t *table[P]) get(ref string) (P, bool) {
	if id, err := uuid.Parse(ref); err == nil {
		if e, ok := t.rows[id]; ok {
			return e, true
		}
	}
	return t.named(ref)
}

// named finds the entity holding name.
func (t *table[P]) named(name string) (P, bool) {
	id, ok := t.names[name]
	if !ok {
		var zero P
		return zero, false
	}
	return t.rows[id], true
}

// namedBytes is named for a name in bytes, without converting it.
func (t *table[P]) namedBytes(name []byte) (P, bool) {
	id, ok := t.names[string(name)]
	if !ok {
		var zero P
		return zero, false
	}
	return t.rows[id], true
}

// appendTo appends every entity to dst.
func (t *table[P]) appendTo(dst []entity) []entity {
	for _, e := range t.rows {
		dst = append(dst, e)
	}
	return dst
}

// deletes appends to evs the deletion of every entity match holds, in id
// order, so that a cascade's records do not depend on map order.
func (t *table[P]) deletes(evs []event, match func(P) bool) []event {
	n := len(evs)
	for id, e := range t.rows {
		if match(e) {
			k, _ := e.ref()
			evs = append(evs, entityDeleted{kind: k, id: id})
		}
	}
	slices.SortFunc(evs[n:], func(x, y event) int { return cmpUUID(x.(entityDeleted).id, y.(entityDeleted).id) })
	return evs
}

// anyTable is a table whatever its entity type, as apply reaches it by
// kind.
type anyTable interface {
	put(e entity)
	del(id uuid.UUID)
	appendTo(dst []entity) []entity
	share()
}

func (t *table[P]) put(e entity)     { t.save(e.(P)) }
func (t *table[P]) del(id uuid.UUID) { t.drop(id) }
