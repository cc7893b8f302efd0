package keys

import (
	"bytes"
	"flag"
	"fmt"
	"testing"

	"github.com/google/uuid"

	"gatehouse/actors"
	"gatehouse/wal"
	"gatehouse/wal/waltest"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

// goldenRecords is one fixed value of every record type the keys write
// (and the engine's barrier; the accounts' are in actors/accounts). The golden files pin their bytes: a diff means
// the on-disk format changed, which needs a new type (or version) and a
// decoder kept for the old one.
func goldenRecords() []struct {
	name string
	rec  wal.Record
} {
	out := []struct {
		name string
		rec  wal.Record
	}{{"001_barrier", wal.Record{Type: actors.TypeBarrier}}}
	add := func(name string, r wal.Record) {
		out = append(out, struct {
			name string
			rec  wal.Record
		}{fmt.Sprintf("%03d_%s", r.Type, name), r})
	}
	for _, ev := range sampleEvents() {
		add(map[wal.Type]string{
			recKeyCreated: "key_created", recKeyRotated: "key_rotated", recKeyRevoked: "key_revoked",
			recKeyDeleted: "key_deleted", recKeyUpdated: "key_updated", recKeyUsed: "key_used",
		}[ev.record().Type], ev.record())
	}
	var batch keysUsed
	for _, ev := range sampleEvents() {
		if u, ok := ev.(keyUsed); ok {
			batch = append(batch, u, keyUsed{id: uuid.MustParse("7f1c8a52-3c39-4d0e-9a51-1f2a3b4c5d6e"), pairs: []secCount{{sec: 1795000000, n: 3}}})
		}
	}
	add("keys_used", batch.record())
	return out
}

func TestGoldenRecords(t *testing.T) {
	for _, g := range goldenRecords() {
		t.Run(g.name, func(t *testing.T) {
			want := waltest.Golden(t, g.name, g.rec.Data, *update)
			// What the golden file holds decodes, and re-encodes to itself.
			r := wal.Record{Type: g.rec.Type, Data: want}
			if r.Type == recKeysUsed {
				batch, err := decodeKeysUsed(want)
				if err != nil || len(batch) != 2 || !bytes.Equal(batch.record().Data, want) {
					t.Errorf("decode/encode = %v, %d keys", err, len(batch))
				}
			}
			if ev, ok, err := decodeKeyEvent(r); ok {
				if err != nil || !bytes.Equal(ev.record().Data, want) {
					t.Errorf("decode/encode = %v, %q", err, ev.record().Data)
				}
			}
		})
	}
}
