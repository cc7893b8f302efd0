package snapshot

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"strconv"
	"strings"
)

// The file layout; doc.go describes it byte by byte.
const (
	magic         = "GHSNAP"
	formatVersion = 1

	offVersion  = len(magic)     // 6
	offIndex    = offVersion + 2 // 8
	offLength   = offIndex + 8   // 16
	headerSize  = offLength + 8  // 24
	trailerSize = 4              // crc32c
	overhead    = headerSize + trailerSize

	snapExt   = ".snap"
	tmpExt    = ".tmp"
	brokenExt = ".broken"
)

// castagnoli is the CRC-32C table; crc32 uses SSE4.2/ARMv8 instructions for it.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// snapName returns the file name of the snapshot at index idx.
func snapName(idx uint64) string {
	return fmt.Sprintf("%016x%s", idx, snapExt)
}

// parseSnapName returns the index encoded in a snapshot file name. Only the
// exact form written by snapName is accepted (16 lowercase hex digits).
func parseSnapName(name string) (uint64, bool) {
	hex, ok := strings.CutSuffix(name, snapExt)
	if !ok || len(hex) != 16 {
		return 0, false
	}
	idx, err := strconv.ParseUint(hex, 16, 64)
	if err != nil || snapName(idx) != name {
		return 0, false
	}
	return idx, true
}

// putHeader fills hdr (headerSize bytes) for a payload of n bytes at index idx.
func putHeader(hdr []byte, idx, n uint64) {
	copy(hdr, magic)
	binary.BigEndian.PutUint16(hdr[offVersion:], formatVersion)
	binary.BigEndian.PutUint64(hdr[offIndex:], idx)
	binary.BigEndian.PutUint64(hdr[offLength:], n)
}

// decode validates a whole snapshot file read from the file named for index
// idx and returns its payload, a subslice of data. Every failure wraps
// ErrCorrupt. It never panics, whatever data holds.
func decode(idx uint64, data []byte) ([]byte, error) {
	if len(data) < overhead {
		return nil, fmt.Errorf("file of %d bytes is shorter than header and trailer: %w", len(data), ErrCorrupt)
	}
	if !bytes.Equal(data[:offVersion], []byte(magic)) {
		return nil, fmt.Errorf("bad magic %q: %w", data[:offVersion], ErrCorrupt)
	}
	if v := binary.BigEndian.Uint16(data[offVersion:]); v != formatVersion {
		return nil, fmt.Errorf("unknown version %d: %w", v, ErrCorrupt)
	}
	if got := binary.BigEndian.Uint64(data[offIndex:]); got != idx {
		return nil, fmt.Errorf("header index %d does not match file name index %d: %w", got, idx, ErrCorrupt)
	}
	n := binary.BigEndian.Uint64(data[offLength:])
	if have := uint64(len(data) - overhead); n != have {
		return nil, fmt.Errorf("payload length %d, file holds %d: %w", n, have, ErrCorrupt)
	}
	end := len(data) - trailerSize
	want := binary.BigEndian.Uint32(data[end:])
	if got := crc32.Checksum(data[:end], castagnoli); got != want {
		return nil, fmt.Errorf("crc32c %08x, trailer says %08x: %w", got, want, ErrCorrupt)
	}
	return data[headerSize:end], nil
}

// crc32cCombine returns the CRC-32C of A||B given crcA = CRC(A), crcB = CRC(B)
// and lenB = len(B), without reading A or B again (zlib's crc32_combine).
// Save needs it because the header, which the checksum covers first, holds
// the payload length, known only once the payload has been streamed.
func crc32cCombine(crcA, crcB uint32, lenB int64) uint32 {
	return multModP(xPow8n(lenB), crcA) ^ crcB
}

// multModP multiplies a and b modulo the reflected Castagnoli polynomial.
// a must not be zero.
func multModP(a, b uint32) uint32 {
	var p uint32
	for m := uint32(1) << 31; ; m >>= 1 {
		if a&m != 0 {
			p ^= b
			if a&(m-1) == 0 {
				return p
			}
		}
		if b&1 != 0 {
			b = b>>1 ^ crc32.Castagnoli
		} else {
			b >>= 1
		}
	}
}

// xPow8n returns x^(8n) modulo the polynomial: the effect on a CRC of
// appending n zero bytes.
func xPow8n(n int64) uint32 {
	p := uint32(1) << 31  // x^0
	sq := uint32(1) << 30 // x^1, squared each round: x^(2^k)
	for e := uint64(n) << 3; e != 0; e >>= 1 {
		if e&1 != 0 {
			p = multModP(sq, p)
		}
		sq = multModP(sq, sq)
	}
	return p
}
