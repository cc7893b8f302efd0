package keys

import (
	"fmt"

	"github.com/google/uuid"

	"gatehouse/actors"
	"gatehouse/wal"
)

var _ actors.RecordDescriber = DescribeRecord

// recordNames names the keys' record types.
var recordNames = map[wal.Type]string{
	recKeyCreated: "key created", recKeyRotated: "key rotated", recKeyRevoked: "key revoked",
	recKeyDeleted: "key deleted", recKeyUpdated: "key updated", recKeyUsed: "key usage", recKeysUsed: "usage batch",
}

// DescribeRecord describes the keys' record types (actors.RecordDescriber)
// for gatehouse repair's report: the type, the key's id, owner and name;
// never its hash or sealed secret. data may be damaged.
func DescribeRecord(t wal.Type, data []byte) (name string, ids []string, ok bool) {
	if name, ok = recordNames[t]; !ok {
		return "", nil, false
	}
	ids = []string{} // binary: no JSON to read
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
	}
	return name, ids, true
}
