package actors

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/google/uuid"

	"gatehouse/wal"
)

// recordNames names the record types of this package for DescribeRecord.
var recordNames = map[wal.Type]string{
	recBarrier:    "snapshot barrier",
	recKeyCreated: "key created", recKeyRotated: "key rotated", recKeyRevoked: "key revoked",
	recKeyDeleted: "key deleted", recKeyUpdated: "key updated", recKeyUsed: "key usage", recKeysUsed: "usage batch",
	wal.TypeLost: "lost record (a repair's marker)",
}

// jsonIDs finds the identifying fields of a JSON payload, even a damaged
// one: never a hash, a sealed value, a token or a password.
var jsonIDs = regexp.MustCompile(`"(id|user_id|email|role|plan|kind|name)"\s*:\s*"([^"\\]{0,80})"`)

// RecordNamer names the record types a domain owns (ok false for the
// others), for DescribeRecord: actors/accounts' RecordName.
type RecordNamer func(t wal.Type) (name string, ok bool)

// DescribeRecord says what a WAL record of type t with payload data was,
// for an operator reading a repair's report: the type's name (the keys',
// or the first of namers to know it) and what can be read of its
// identifiers (ids, email, role, a key's name). It never shows a secret:
// no key hash, sealed key, password hash or session token. data may be
// damaged; what does not decode is left out. Other types get their number
// and the identifiers of their JSON.
func DescribeRecord(t wal.Type, data []byte, namers ...RecordNamer) string {
	name, ok := recordNames[t]
	for _, n := range namers {
		if ok {
			break
		}
		name, ok = n(t)
	}
	if !ok {
		name = fmt.Sprintf("type %d", t)
		if t >= 64 {
			name = fmt.Sprintf("extension record type %d", t)
		}
	}
	var ids []string
	switch t {
	case recKeyCreated:
		d := dec{b: data}
		var id, owner uuid.UUID
		d.fixed(id[:])
		d.fixed(owner[:])
		keyName := d.str()
		if len(data) >= 32 {
			ids = append(ids, "key id "+id.String(), "owner "+owner.String())
		}
		if d.err() == nil && len(keyName) <= 80 {
			ids = append(ids, fmt.Sprintf("name %q", keyName))
		}
	case recKeyRotated, recKeyRevoked, recKeyDeleted, recKeyUpdated, recKeyUsed:
		if len(data) >= 16 {
			id, _ := uuid.FromBytes(data[:16])
			ids = append(ids, "key id "+id.String())
		}
	default:
		for _, m := range jsonIDs.FindAllSubmatch(data, 8) {
			ids = append(ids, fmt.Sprintf("%s %q", m[1], m[2]))
		}
	}
	if len(ids) == 0 {
		return name
	}
	return name + ": " + strings.Join(ids, ", ")
}
