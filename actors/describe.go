package actors

import (
	"fmt"
	"regexp"
	"strings"

	"gatehouse/wal"
)

// jsonIDs finds the identifying fields of a JSON payload, even a damaged
// one: never a hash, a sealed value, a token or a password.
var jsonIDs = regexp.MustCompile(`"(id|user_id|email|role|plan|kind|name)"\s*:\s*"([^"\\]{0,80})"`)

// RecordDescriber describes the record types one domain owns, for
// DescribeRecord (keys.DescribeRecord, accounts.DescribeRecord): ok false
// for a type that is not its own; ids are what can be read of the record's
// identifiers, never a secret (nil: DescribeRecord reads the identifying
// fields of a JSON payload). data may be damaged.
type RecordDescriber func(t wal.Type, data []byte) (name string, ids []string, ok bool)

// DescribeRecord says what a WAL record of type t with payload data was,
// for an operator reading a repair's report: the type's name (the engine's
// or the first of domains to know it) and what can be read of its
// identifiers (ids, email, role, a key's name). It never shows a secret:
// no key hash, sealed key, password hash or session token. data may be
// damaged; what does not decode is left out. Other types get their number
// and the identifiers of their JSON.
func DescribeRecord(t wal.Type, data []byte, domains ...RecordDescriber) string {
	var (
		name string
		ids  []string
		ok   bool
	)
	switch t {
	case recBarrier:
		name, ok = "snapshot barrier", true
	case wal.TypeLost:
		name, ok = "lost record (a repair's marker)", true
	}
	for _, d := range domains {
		if ok {
			break
		}
		name, ids, ok = d(t, data)
	}
	if !ok {
		name = fmt.Sprintf("type %d", t)
		if t >= 64 {
			name = fmt.Sprintf("extension record type %d", t)
		}
	}
	if ids == nil {
		for _, m := range jsonIDs.FindAllSubmatch(data, 8) {
			ids = append(ids, fmt.Sprintf("%s %q", m[1], m[2]))
		}
	}
	if len(ids) == 0 {
		return name
	}
	return name + ": " + strings.Join(ids, ", ")
}
