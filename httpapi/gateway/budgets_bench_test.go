package gateway

import (
	"io"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"
)

// cpuTime is the process's user + system CPU time so far.
func cpuTime(tb testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkChatTurnBudgets is issue 34's speed target side by side: one
// sequential chat turn over HTTP (keep-alive) on the echo provider
// without any budget, and with a user and an agent budget binding it
// (each call spending from the node's allowance on each budget; a hold
// written every chunkCalls calls, settlements every flush interval).
// cpu-ns/op is the whole process's CPU (client, server and WAL) per
// turn: the measure. Run the two in one invocation, -count
// interleaving them.
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
			cpu0 := cpuTime(b)
			for b.Loop() {
				turn()
			}
			b.ReportMetric(float64(cpuTime(b)-cpu0)/float64(b.N), "cpu-ns/op")
		})
	}
}
