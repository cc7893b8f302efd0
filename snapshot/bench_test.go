package snapshot

import (
	"log/slog"
	"testing"
)

func BenchmarkSave64KB(b *testing.B)  { benchSave(b, 64<<10) }
func BenchmarkSave16MB(b *testing.B)  { benchSave(b, 16<<20) }
func BenchmarkSave128MB(b *testing.B) { benchSave(b, 128<<20) }

func BenchmarkLoad64KB(b *testing.B)  { benchLoad(b, 64<<10) }
func BenchmarkLoad16MB(b *testing.B)  { benchLoad(b, 16<<20) }
func BenchmarkLoad128MB(b *testing.B) { benchLoad(b, 128<<20) }

// benchChunk is the write size of the benchmark's payload writer, about what
// an encoder behind its own buffer would issue.
const benchChunk = 64 << 10

// benchSave measures Save of an n-byte payload, fsyncs and retention included.
func benchSave(b *testing.B, n int) {
	b.Helper()
	s := benchStore(b)
	p := payloadFor(1, n)
	b.SetBytes(int64(n))
	b.ReportAllocs()
	idx := uint64(0)
	for b.Loop() {
		idx++
		if _, err := s.Save(idx, writeChunks(p, benchChunk)); err != nil {
			b.Fatal(err)
		}
	}
}

// benchLoad measures Load of an n-byte snapshot: read, validate, hand over.
func benchLoad(b *testing.B, n int) {
	b.Helper()
	s := benchStore(b)
	if _, err := s.Save(1, writeChunks(payloadFor(1, n), benchChunk)); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(n))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Load(func(uint64, []byte) error { return nil }); err != nil {
			b.Fatal(err)
		}
	}
}

func benchStore(b *testing.B) *Store {
	b.Helper()
	s, err := New(Config{Dir: b.TempDir(), Retain: 2}, slog.New(slog.DiscardHandler), nil)
	if err != nil {
		b.Fatal(err)
	}
	return s
}
