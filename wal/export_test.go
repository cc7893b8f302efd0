package wal

import "encoding/binary"

// Test-only access to internals, for the external wal_test package.

// EncodeRecord returns the envelope of r stored at seq, without validating r.
func EncodeRecord(seq uint64, r Record) []byte { return appendRecord(nil, seq, r) }

// DecodeRecord is decodeRecord.
var DecodeRecord = decodeRecord

// Commits returns the number of committed batches.
func (l *Log) Commits() uint64 { return l.commits.Load() }

// Reseal recomputes env's CRC for seq in place, whatever its version and type
// bytes say, and returns env.
func Reseal(seq uint64, env []byte) []byte {
	binary.BigEndian.PutUint32(env[2:], recordCRC(seq, env))
	return env
}
