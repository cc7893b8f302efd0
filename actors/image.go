package actors

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
)

// Snapshot payload (inside the snapshot package's envelope), version 2:
// named sections only, one per domain: the keys', then each extension's
// (the accounts' among them).
//
//	magic "GHIMG\x02"
//	uvarint n | n × (uvarint len | section name | uvarint len | section)
//
// A section's layout is its domain's own: whatever Capture (or
// StreamedSection's CaptureParts) returned ("keys": actors/keys/image.go;
// "accounts": users, sessions).
//
// Version 1 ("GHIMG\x01", written before issue 33) held the accounts'
// section and the keys' back to back, unnamed, then n named extension
// sections; decodeSectionsV1 cuts it into the same sections (views, no
// copy), so every domain decodes one section whatever the version.
var (
	imageMagic   = []byte("GHIMG\x02")
	imageMagicV1 = []byte("GHIMG\x01")
)

// The section names of version 2 that version 1 held unnamed: the keys'
// section and the accounts' (whose layout actors/accounts keeps: uvarint
// len | users JSON | uvarint len | sessions JSON).
const (
	legacyKeys     = "keys"
	legacyAccounts = "accounts"
)

// legacyMinKeyBytes bounds version 1's key count (the smallest encoded
// key is larger).
const legacyMinKeyBytes = 64

// imageWriter streams a snapshot payload.
type imageWriter struct {
	w   io.Writer
	err error
	tmp []byte
}

func (iw *imageWriter) write(b []byte) {
	if iw.err == nil {
		_, iw.err = iw.w.Write(b)
	}
}

func (iw *imageWriter) uvarint(v uint64) {
	iw.tmp = binary.AppendUvarint(iw.tmp[:0], v)
	iw.write(iw.tmp)
}

func (iw *imageWriter) blob(b []byte) {
	iw.uvarint(uint64(len(b)))
	iw.write(b)
}

func (iw *imageWriter) block(count int, b []byte) {
	if count == 0 {
		return
	}
	iw.uvarint(uint64(count))
	iw.blob(b)
}

// Section is one named section of a snapshot payload, in parts so that a
// StreamedSection (the keys' blocks) is written as captured, not copied
// into one buffer.
type Section struct {
	Name  string
	Parts [][]byte
}

func (sc Section) size() int {
	n := 0
	for _, p := range sc.Parts {
		n += len(p)
	}
	return n
}

// WriteSnapshot streams a snapshot payload of secs, in their order.
func WriteSnapshot(w io.Writer, secs []Section) error {
	iw := &imageWriter{w: w}
	iw.write(imageMagic)
	iw.uvarint(uint64(len(secs)))
	for _, sc := range secs {
		iw.blob([]byte(sc.Name))
		iw.uvarint(uint64(sc.size()))
		for _, p := range sc.Parts {
			iw.write(p)
		}
	}
	return iw.err
}

// DecodeSnapshot cuts a snapshot payload of either version into its
// sections by name; each is a view into payload.
func DecodeSnapshot(payload []byte) (map[string][]byte, error) {
	switch {
	case bytes.HasPrefix(payload, imageMagic):
		d := &frameReader{b: payload[len(imageMagic):]}
		secs := map[string][]byte{}
		for range d.count(2) {
			name, sc := d.str(), d.view()
			if _, dup := secs[name]; dup && d.bad == nil {
				return nil, fmt.Errorf("image: section %q twice: %w", name, ErrCorrupt)
			}
			secs[name] = sc
		}
		if err := d.done("image"); err != nil {
			return nil, err
		}
		return secs, nil
	case bytes.HasPrefix(payload, imageMagicV1):
		return decodeSectionsV1(payload[len(imageMagicV1):])
	}
	return nil, fmt.Errorf("image magic: %w", ErrCorrupt)
}

// decodeSectionsV1 cuts a version-1 payload (after its magic) into the
// sections of version 2: its leading accounts and keys layouts are those
// sections' layouts, so each is the view of the bytes it spans.
func decodeSectionsV1(b []byte) (map[string][]byte, error) {
	d := &frameReader{b: b}
	at := func() int { return len(b) - len(d.b) }
	d.view() // users
	d.view() // sessions
	accEnd := at()
	d.count(legacyMinKeyBytes)
	for {
		count := d.uvarint()
		if d.bad != nil || count == 0 {
			break
		}
		d.view()
	}
	keysEnd := at()
	secs := map[string][]byte{legacyAccounts: b[:accEnd:accEnd], legacyKeys: b[accEnd:keysEnd:keysEnd]}
	for range d.count(2) {
		name, sc := d.str(), d.view()
		secs[name] = sc
	}
	if err := d.done("image v1"); err != nil {
		return nil, err
	}
	return secs, nil
}

// frameReader reads the payload's framing: uvarints and the
// length-prefixed names and sections between them (a domain's section is
// its own: actors/keys has the codec its records and blocks use). The
// first failure sticks: later reads return zero values and done reports
// it, wrapping ErrCorrupt.
type frameReader struct {
	b   []byte
	bad error
}

func (d *frameReader) fail(what string) {
	if d.bad == nil {
		d.bad = fmt.Errorf("decode %s: %w", what, ErrCorrupt)
	}
}

func (d *frameReader) uvarint() uint64 {
	if d.bad != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail("uvarint")
		return 0
	}
	d.b = d.b[n:]
	return v
}

// count reads a length, each element taking at least minElem of the
// bytes left, so corrupt input cannot make a decoder allocate wildly.
func (d *frameReader) count(minElem int) int {
	n := d.uvarint()
	if d.bad == nil && n > uint64(len(d.b)/max(minElem, 1)) {
		d.fail("length")
		return 0
	}
	return int(n)
}

// view returns the next length-prefixed run, aliasing the input.
func (d *frameReader) view() []byte {
	n := d.count(1)
	if d.bad != nil {
		return nil
	}
	v := d.b[:n:n]
	d.b = d.b[n:]
	return v
}

func (d *frameReader) str() string { return string(d.view()) }

// done reports the first failure, or trailing bytes, reading what.
func (d *frameReader) done(what string) error {
	if d.bad == nil && len(d.b) != 0 {
		d.fail(what + " trailing bytes")
	}
	return d.bad
}
