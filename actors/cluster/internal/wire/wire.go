// Package wire reads the varint encodings the cluster's records and
// transport messages are written in (encoding/binary's Append functions).
package wire

import "encoding/binary"

// Reader reads varints from B; Err is set by the first malformed or
// truncated one, after which every read returns 0.
type Reader struct {
	B   []byte
	Err bool
}

// Uvarint reads an unsigned varint.
func (r *Reader) Uvarint() uint64 {
	v, n := binary.Uvarint(r.B)
	if n <= 0 {
		r.Err, r.B = true, nil
		return 0
	}
	r.B = r.B[n:]
	return v
}

// Varint reads a signed varint.
func (r *Reader) Varint() int64 {
	v, n := binary.Varint(r.B)
	if n <= 0 {
		r.Err, r.B = true, nil
		return 0
	}
	r.B = r.B[n:]
	return v
}

// U32 reads an unsigned varint that must fit 32 bits.
func (r *Reader) U32() uint32 {
	v := r.Uvarint()
	if v > 1<<32-1 {
		r.Err = true
	}
	return uint32(v)
}
