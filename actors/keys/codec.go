package keys

import (
	"encoding/binary"
	"fmt"
	"gatehouse/actors"
)

// The keys' binary codec: their records, key states and blocks (the
// engine frames the snapshot around their section, actors/image.go); a
// decoding failure wraps actors.ErrCorrupt.

// enc appends little binary fields to a buffer. It never fails.
type enc struct{ b []byte }

func (e *enc) u8(v uint8)       { e.b = append(e.b, v) }
func (e *enc) uvarint(v uint64) { e.b = binary.AppendUvarint(e.b, v) }
func (e *enc) varint(v int64)   { e.b = binary.AppendVarint(e.b, v) }
func (e *enc) bytes(v []byte)   { e.uvarint(uint64(len(v))); e.b = append(e.b, v...) }
func (e *enc) str(v string)     { e.uvarint(uint64(len(v))); e.b = append(e.b, v...) }
func (e *enc) fixed(v []byte)   { e.b = append(e.b, v...) }
func (e *enc) boolean(v bool) {
	if v {
		e.u8(1)
	} else {
		e.u8(0)
	}
}

// dec reads what enc wrote. The first failure sticks: later reads return
// zero values and err() reports it, so decoders check once at the end.
type dec struct {
	b   []byte
	bad error
	ar  *arena // when set, strings are carved from it (restore, see arena)
}

func (d *dec) fail(what string) {
	if d.bad == nil {
		d.bad = fmt.Errorf("decode %s: %w", what, actors.ErrCorrupt)
	}
}

func (d *dec) err() error { return d.bad }

func (d *dec) u8() uint8 {
	if d.bad != nil || len(d.b) < 1 {
		d.fail("byte")
		return 0
	}
	v := d.b[0]
	d.b = d.b[1:]
	return v
}

func (d *dec) boolean() bool {
	switch d.u8() {
	case 0:
		return false
	case 1:
		return true
	default:
		d.fail("bool")
		return false
	}
}

func (d *dec) uvarint() uint64 {
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

func (d *dec) varint() int64 {
	if d.bad != nil {
		return 0
	}
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail("varint")
		return 0
	}
	d.b = d.b[n:]
	return v
}

// count reads a length and checks it against what is left, each element
// taking at least min bytes, so corrupt input cannot make us allocate wildly.
func (d *dec) count(minElem int) int {
	n := d.uvarint()
	if d.bad == nil && n > uint64(len(d.b)/max(minElem, 1)) {
		d.fail("length")
		return 0
	}
	return int(n)
}

func (d *dec) bytes() []byte {
	n := d.count(1)
	if d.bad != nil {
		return nil
	}
	v := append([]byte(nil), d.b[:n]...)
	d.b = d.b[n:]
	return v
}

// view is bytes without the copy: the result aliases the input.
func (d *dec) view() []byte {
	n := d.count(1)
	if d.bad != nil {
		return nil
	}
	v := d.b[:n:n]
	d.b = d.b[n:]
	return v
}

func (d *dec) str() string {
	n := d.count(1)
	if d.bad != nil {
		return ""
	}
	var v string
	if d.ar != nil {
		v = d.ar.str(d.b[:n])
	} else {
		v = string(d.b[:n])
	}
	d.b = d.b[n:]
	return v
}

func (d *dec) fixed(dst []byte) {
	if d.bad != nil || len(d.b) < len(dst) {
		d.fail("fixed field")
		return
	}
	copy(dst, d.b[:len(dst)])
	d.b = d.b[len(dst):]
}

// done fails unless every byte was consumed.
func (d *dec) done(what string) error {
	if d.bad == nil && len(d.b) != 0 {
		d.fail(what + " trailing bytes")
	}
	return d.bad
}
