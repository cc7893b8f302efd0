package wal_test

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"gatehouse/wal"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

// goldenRecords are the records pinned in testdata/record_v1.golden.
var goldenRecords = []entry{
	{Seq: 1, Rec: wal.Record{Type: 1, Data: []byte("hello")}},
	{Seq: 2, Rec: wal.Record{Type: 2}},
	{Seq: 255, Rec: wal.Record{Type: 255, Data: []byte{0x00, 0xff, 0x10}}},
	{Seq: 1 << 40, Rec: wal.Record{Type: 7, Data: []byte(`{"key":"k_123","rate_per_min":600}`)}},
	{Seq: ^uint64(0), Rec: wal.Record{Type: 3, Data: []byte("max index")}},
}

// TestGoldenRecordV1 pins the v1 envelope. Run with -update after an
// intended change, and review the diff: existing golden files never change.
func TestGoldenRecordV1(t *testing.T) {
	path := filepath.Join("testdata", "record_v1.golden")
	var b strings.Builder
	b.WriteString("# wal record envelope v1: version(1) | type(1) | crc32c(4, big-endian) | payload\n")
	b.WriteString("# crc32c (Castagnoli) covers key(8, big-endian) || version || type || payload\n")
	for _, e := range goldenRecords {
		fmt.Fprintf(&b, "index %d type %d data %q\n", e.Seq, e.Rec.Type, e.Rec.Data)
		fmt.Fprintf(&b, "envelope %x\n", wal.EncodeRecord(e.Seq, e.Rec))
	}
	if *update {
		if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
			t.Fatalf("write golden: %v", err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read golden (run with -update to create it): %v", err)
	}
	if diff := cmp.Diff(string(want), b.String()); diff != "" {
		t.Errorf("encoding differs from %s (-golden +got):\n%s", path, diff)
	}
	// The pinned bytes must keep decoding to the same records.
	for i, env := range goldenEnvelopes(t, want) {
		e := goldenRecords[i]
		got, err := wal.DecodeRecord(e.Seq, env)
		if err != nil {
			t.Fatalf("DecodeRecord(%d, golden %x) = %v", e.Seq, env, err)
		}
		if diff := cmp.Diff(e.Rec, got); diff != "" {
			t.Errorf("DecodeRecord(%d, golden) mismatch (-want +got):\n%s", e.Seq, diff)
		}
	}
}

func goldenEnvelopes(tb testing.TB, golden []byte) [][]byte {
	tb.Helper()
	var envs [][]byte
	sc := bufio.NewScanner(bytes.NewReader(golden))
	for sc.Scan() {
		h, ok := strings.CutPrefix(sc.Text(), "envelope ")
		if !ok {
			continue
		}
		env, err := hex.DecodeString(h)
		if err != nil {
			tb.Fatalf("golden envelope %q: %v", h, err)
		}
		envs = append(envs, env)
	}
	if len(envs) != len(goldenRecords) {
		tb.Fatalf("golden has %d envelopes, want %d", len(envs), len(goldenRecords))
	}
	return envs
}

func TestDecodeRecord(t *testing.T) {
	valid := wal.EncodeRecord(9, wal.Record{Type: 4, Data: []byte("payload")})
	with := func(edit func([]byte) []byte) []byte { return edit(bytes.Clone(valid)) }
	// reCRC rewrites the version and type bytes and then fixes the CRC, as a
	// writer of that version would.
	reCRC := func(version, typ byte) []byte {
		env := bytes.Clone(valid)
		env[0], env[1] = version, typ
		return wal.Reseal(9, env)
	}
	tests := []struct {
		name    string
		seq     uint64
		env     []byte
		wantErr error
	}{
		{name: "valid", seq: 9, env: valid},
		{name: "empty", seq: 9, env: nil, wantErr: wal.ErrCorrupt},
		{name: "short header", seq: 9, env: valid[:5], wantErr: wal.ErrCorrupt},
		{name: "torn payload", seq: 9, env: valid[:len(valid)-1], wantErr: wal.ErrCorrupt},
		{name: "flipped payload bit", seq: 9, env: with(func(b []byte) []byte { b[7] ^= 1; return b }), wantErr: wal.ErrCorrupt},
		{name: "flipped crc bit", seq: 9, env: with(func(b []byte) []byte { b[3] ^= 0x80; return b }), wantErr: wal.ErrCorrupt},
		{name: "zeroed type", seq: 9, env: with(func(b []byte) []byte { b[1] = 0; return b }), wantErr: wal.ErrCorrupt},
		{name: "extra byte", seq: 9, env: append(bytes.Clone(valid), 0), wantErr: wal.ErrCorrupt},
		{name: "copied to another index", seq: 10, env: valid, wantErr: wal.ErrCorrupt},
		{name: "type 0 with valid crc", seq: 9, env: reCRC(1, 0), wantErr: wal.ErrCorrupt},
		{name: "version 0 with valid crc", seq: 9, env: reCRC(0, 4), wantErr: wal.ErrCorrupt},
		{name: "version 2 with valid crc", seq: 9, env: reCRC(2, 4), wantErr: wal.ErrUnsupportedVersion},
		{name: "version 2 with bad crc", seq: 9, env: with(func(b []byte) []byte { b[0] = 2; return b }), wantErr: wal.ErrCorrupt},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := wal.DecodeRecord(tt.seq, tt.env)
			if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil) != (err == nil) {
				t.Errorf("DecodeRecord(%d, %x) = %v, want %v", tt.seq, tt.env, err, tt.wantErr)
			}
		})
	}
}

// FuzzDecodeRecord checks that the decoder never panics and either decodes
// bytes that re-encode exactly or returns ErrCorrupt (ErrUnsupportedVersion
// for a well-sealed record of an unknown version).
func FuzzDecodeRecord(f *testing.F) {
	for _, e := range goldenRecords {
		f.Add(e.Seq, wal.EncodeRecord(e.Seq, e.Rec))
	}
	f.Add(uint64(3), []byte{})
	f.Add(uint64(3), []byte{1, 1, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, seq uint64, env []byte) {
		rec, err := wal.DecodeRecord(seq, env)
		if err != nil {
			if !errors.Is(err, wal.ErrCorrupt) && !errors.Is(err, wal.ErrUnsupportedVersion) {
				t.Fatalf("DecodeRecord(%d, %x) = %v, want ErrCorrupt or ErrUnsupportedVersion", seq, env, err)
			}
			return
		}
		if got := wal.EncodeRecord(seq, rec); !bytes.Equal(got, env) {
			t.Fatalf("EncodeRecord(DecodeRecord(%d, %x)) = %x, want the input", seq, env, got)
		}
	})
}
