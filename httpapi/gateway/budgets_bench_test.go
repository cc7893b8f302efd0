package gateway

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// BenchmarkChatTurnBudgets is issue 34's speed target side by side: one
// sequential chat turn over HTTP (keep-alive) on the echo provider
// without any budget, and with a user and an agent budget binding it
// (each call reserved and settled: records 74 and 75 on two shards).
// Run the two in one invocation, -count interleaving them.
func BenchmarkChatTurnBudgets(b *testing.B) {
	for _, tc := range []struct {
		name    string
		budgets bool
	}{{"none", false}, {"user+agent", true}} {
		b.Run(tc.name, func(b *testing.B) {
			e := newGWEnv(b, gwOpts{token: gwToken})
			e.seedAgent("default", `{"delay_ms":0}`, "")
			if tc.budgets {
				e.must(201, "POST", "/v1/budgets", gwToken, `{"subject":{"type":"user","id":"alice"},"period":"total","max_usd":1000000,"max_tokens":1000000000000}`)
				e.must(201, "POST", "/v1/budgets", gwToken, `{"subject":{"type":"agent","id":"default"},"period":"total","max_usd":1000000}`)
			}
			hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
			defer hc.CloseIdleConnections()
			body := `{"model":"gateway:default","messages":[{"role":"user","content":"what is next?"}]}`
			turn := func() {
				req, _ := http.NewRequest("POST", e.url+"/v1/chat/completions", strings.NewReader(body))
				req.Header.Set("Authorization", "Bearer "+gwToken)
				req.Header.Set("X-Gateway-User-Id", "alice")
				resp, err := hc.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					b.Fatalf("turn = %d", resp.StatusCode)
				}
			}
			for range 20 {
				turn()
			}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				turn()
			}
		})
	}
}
