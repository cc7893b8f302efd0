package keys

import (
	"bytes"
	"errors"
	"reflect"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"

	"gatehouse/actors"
	"gatehouse/wal"
)

func sampleEvents() []keyEvent {
	id := uuid.MustParse("6f1c8a52-3c39-4d0e-9a51-1f2a3b4c5d6e")
	var h hash
	h[0], h[31] = 1, 2
	return []keyEvent{
		keyCreated{rec: keyRecord{id: id, owner: id, name: "ключ", preview: previewChars{'a', 'b', 'c', 'd', 'w', 'x', 'y', 'z'}, hash: h,
			sealed: sealedKey{1, 2, 3}, rateLimit: 1000, createdAt: 1795000000, expiresAt: 1796000000}},
		keyRotated{id: id, preview: previewChars{'p'}, hash: h, sealed: sealedKey{9}, at: 1795000001, graceEnds: 1795086401},
		keyRevoked{id: id, at: 1795000002},
		keyDeleted{id: id},
		keyUpdated{id: id, name: "n", rateLimit: 1e9, expiresAt: 0},
		keyUsed{id: id, pairs: []secCount{{sec: 1795000000, n: 3}, {sec: 1795000002, n: 1 << 31}}},
	}
}

var allowUnexported = cmp.Exporter(func(reflect.Type) bool { return true })

func TestKeyEventRoundTrip(t *testing.T) {
	for _, ev := range sampleEvents() {
		rec := ev.record()
		got, ok, err := decodeKeyEvent(rec)
		if err != nil || !ok {
			t.Fatalf("decodeKeyEvent(%T) = %v, %v", ev, ok, err)
		}
		if diff := cmp.Diff(ev, got, allowUnexported); diff != "" {
			t.Errorf("round trip %T (-want +got):\n%s", ev, diff)
		}
	}
	if _, ok, _ := decodeKeyEvent(wal.Record{Type: 2}); ok { // the accounts' user record
		t.Error("decodeKeyEvent claimed a user record")
	}
}

// FuzzDecodeKeyEvent: decoding arbitrary bytes never panics; what decodes
// re-encodes to the same bytes, and what does not is actors.ErrCorrupt.
func FuzzDecodeKeyEvent(f *testing.F) {
	for _, ev := range sampleEvents() {
		r := ev.record()
		f.Add(uint8(r.Type), r.Data)
	}
	f.Fuzz(func(t *testing.T, typ uint8, data []byte) {
		rec := wal.Record{Type: wal.Type(typ), Data: data}
		ev, ok, err := decodeKeyEvent(rec)
		if !ok {
			return
		}
		if err != nil {
			if !errors.Is(err, actors.ErrCorrupt) {
				t.Fatalf("error %v does not wrap actors.ErrCorrupt", err)
			}
			return
		}
		// Varints accept non-minimal forms, so compare meaning, then bytes
		// of the canonical form.
		again := ev.record()
		ev2, _, err := decodeKeyEvent(again)
		if err != nil || again.Type != rec.Type {
			t.Fatalf("re-decoding %T: %v", ev, err)
		}
		if diff := cmp.Diff(ev, ev2, allowUnexported); diff != "" {
			t.Fatalf("re-encoding %T changed it (-first +second):\n%s", ev, diff)
		}
		if third := ev2.record(); !bytes.Equal(third.Data, again.Data) {
			t.Fatalf("canonical encoding of %T is not stable", ev)
		}
	})
}

// FuzzDecodeImage: a snapshot payload never panics the decoder.
func FuzzDecodeImage(f *testing.F) {
	var w enc
	st := &keyState{rec: sampleEvents()[0].(keyCreated).rec}
	st.use.add(1795000000, 3)
	st.window().Add(1795000000, 3)
	encodeKeyState(&w, st)
	v1 := enc{b: []byte("GHIMG\x01")} // users, sessions, the keys' blocks, no extension
	v1.bytes([]byte("[]"))
	v1.bytes([]byte("[]"))
	v1.uvarint(1)
	v1.uvarint(1)
	v1.bytes(w.b)
	v1.uvarint(0)
	v1.uvarint(0)
	f.Add(v1.b) // version 1
	var buf bytes.Buffer
	if err := actors.WriteSnapshot(&buf, []actors.Section{keysSection([]keyBlock{{count: 1, buf: w.b}}, 1), {Name: "x", Parts: [][]byte{[]byte("ext")}}}); err != nil {
		f.Fatal(err)
	}
	f.Add(buf.Bytes()) // version 2
	f.Fuzz(func(t *testing.T, payload []byte) {
		if _, err := decodeImage(payload, 4); err != nil && !errors.Is(err, actors.ErrCorrupt) {
			t.Fatalf("error %v does not wrap actors.ErrCorrupt", err)
		}
	})
}
