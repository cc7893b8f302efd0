package gateway

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// BenchmarkMemorySearch: one user's ranked search over 3,000 entries of
// 200 words (Zipf draws from 2,000 words), three query words.
func BenchmarkMemorySearch(b *testing.B) {
	n := newNode(b, DefaultConfig(), nil)
	gw := start(n)
	if _, err := gw.CreateProvider(ctx(b), ProviderInput{Name: "echo", ProviderType: ProviderEcho, Enabled: true}); err != nil {
		b.Fatal(err)
	}
	a, err := gw.CreateAgent(ctx(b), "noisy", AgentInput{AgentKey: ptr("n"), Provider: ptr("echo"), Model: ptr("m")})
	if err != nil {
		b.Fatal(err)
	}
	vocab := make([]string, 2000)
	for i := range vocab {
		vocab[i] = fmt.Sprintf("w%dx", i)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	z := rand.NewZipf(rng, 1.1, 2, uint64(len(vocab)-1))
	for range 3000 {
		var sb strings.Builder
		for range 200 {
			sb.WriteString(vocab[z.Uint64()])
			sb.WriteByte(' ')
		}
		if _, err := gw.SaveMemory(ctx(b), MemoryInput{Content: sb.String(), Agent: a.ID.String(), UserID: "noisy"}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		q := vocab[rng.IntN(len(vocab))] + " " + vocab[rng.IntN(len(vocab))] + " " + vocab[rng.IntN(len(vocab))]
		if _, err := gw.SearchMemory(ctx(b), a.ID, "noisy", q, 10); err != nil {
			b.Fatal(err)
		}
	}
}
