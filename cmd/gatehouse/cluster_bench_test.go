package main

import (
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"gatehouse/actors/cluster/etcdtest"
)

// BenchmarkClusterProxy measures proxied requests on real processes in
// cluster mode (one etcd member and two gatehouse nodes on loopback),
// sent to the node that owns the key and to the other, which forwards the
// admission: "p50-µs" and "p99-µs" of sequential requests (the added p50
// of a forward is the difference), and req/s with 8 clients.
func BenchmarkClusterProxy(b *testing.B) {
	etcd := etcdtest.Start(b, 1)
	up := upstream(b)
	masterKey := hex.EncodeToString([]byte("benchbenchbenchbenchbenchbench12"))
	extra := map[string]any{
		"services": map[string]any{"stub": map[string]any{"upstream": up}},
		"plans":    map[string]any{"standard": 1_000_000_000, "premium": 1_000_000_000},
	}
	nodes := []*clusterNode{
		startClusterNode(b, "a", etcd.Endpoints(), masterKey, extra),
		startClusterNode(b, "b", etcd.Endpoints(), masterKey, extra),
	}
	admin := newClient(nodes[0].c.api)
	admin.login(b, adminEmail, adminPassword)
	waitSettled(b, admin, len(nodes))
	var k createdKey
	var where struct{ Owner string }
	if code, err := admin.do("POST", "/api/keys", map[string]string{"name": "bench"}, nil, &k); err != nil || code != 201 {
		b.Fatalf("create key = %d, %v", code, err)
	}
	if code, err := admin.do("GET", "/api/cluster/keys/"+k.ID, nil, nil, &where); err != nil || code != 200 {
		b.Fatalf("where = %d, %v", code, err)
	}
	owner, other := nodes[0], nodes[1]
	if where.Owner == "b" {
		owner, other = other, owner
	}
	for _, tc := range []struct {
		name string
		n    *clusterNode
	}{{"owner", owner}, {"forwarded", other}} {
		b.Run(tc.name, func(b *testing.B) {
			cl := newClient(tc.n.c.api)
			hdr := map[string]string{"X-API-Key": k.Key}
			lat := make([]time.Duration, 0, b.N)
			for b.Loop() {
				start := time.Now()
				if code, err := cl.do("GET", "/api/proxy/stub/v1/ping", nil, hdr, nil); err != nil || code != 200 {
					b.Fatalf("proxy = %d, %v", code, err)
				}
				lat = append(lat, time.Since(start))
			}
			reportLatency(b, lat)
		})
		b.Run(tc.name+"-8clients", func(b *testing.B) {
			start := time.Now()
			var wg sync.WaitGroup
			per := max(b.N/8, 1)
			for range 8 {
				wg.Go(func() {
					cl := newClient(tc.n.c.api)
					hdr := map[string]string{"X-API-Key": k.Key}
					for range per {
						if code, err := cl.do("GET", "/api/proxy/stub/v1/ping", nil, hdr, nil); err != nil || code != 200 {
							b.Errorf("proxy = %d, %v", code, err)
							return
						}
					}
				})
			}
			wg.Wait()
			b.ReportMetric(float64(8*per)/time.Since(start).Seconds(), "req/s")
		})
	}
}

// waitSettled waits until GET /api/cluster lists members nodes and every
// shard's owner has stayed the same for a second.
func waitSettled(tb testing.TB, admin *client, members int) {
	tb.Helper()
	var last string
	since := time.Now()
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		var view struct {
			Members []struct{ ID string } `json:"members"`
			Shards  []struct {
				Owner string `json:"owner"`
				Epoch int64  `json:"epoch"`
			} `json:"shards"`
		}
		if code, err := admin.do("GET", "/api/cluster", nil, nil, &view); err != nil || code != 200 || len(view.Members) != members {
			continue
		}
		cur := fmt.Sprint(view.Shards)
		if strings.Contains(cur, "{ 0}") {
			continue
		}
		if cur != last {
			last, since = cur, time.Now()
		} else if time.Since(since) >= time.Second {
			return
		}
	}
	tb.Fatal("the cluster's shard owners did not settle within 20s")
}

// BenchmarkClusterBudgetTurn is issue 34's cluster row: a chat turn on
// node b (the echo provider, no delay) for a user without a budget and
// for one whose budget was created on node a, side by side; p50 and p99
// of each. A budgeted turn spends from b's allowance; about one turn in
// 64 takes a new hold under the budget's lock (an etcd lock and an
// append).
func BenchmarkClusterBudgetTurn(b *testing.B) {
	etcd := etcdtest.Start(b, 1)
	masterKey := hex.EncodeToString([]byte("benchbenchbenchbenchbenchbench12"))
	extra := map[string]any{"gateway": map[string]any{"host": "127.0.0.1", "port": 0, "token": "gw-admin"}}
	nodes := []*clusterNode{
		startClusterNode(b, "a", etcd.Endpoints(), masterKey, extra),
		startClusterNode(b, "b", etcd.Endpoints(), masterKey, extra),
	}
	admin := newClient(nodes[0].c.api)
	admin.login(b, adminEmail, adminPassword)
	waitSettled(b, admin, len(nodes))
	gw := newClient(nodes[0].c.gateway)
	for _, u := range []string{"alice", "bob"} {
		hdr := map[string]string{"Authorization": "Bearer gw-admin", "X-Gateway-User-Id": u}
		if u == "alice" {
			if code, err := gw.do("POST", "/v1/providers", map[string]any{"name": "echo", "provider_type": "echo", "settings": map[string]int{"delay_ms": 0}}, hdr, nil); err != nil || code != 201 {
				b.Fatalf("provider = %d, %v", code, err)
			}
		}
		if code, err := gw.do("POST", "/v1/agents", map[string]any{"agent_key": "a-" + u, "provider": "echo", "model": "m"}, hdr, nil); err != nil || code != 201 {
			b.Fatalf("agent = %d, %v", code, err)
		}
	}
	if code, err := gw.do("POST", "/v1/budgets", map[string]any{"subject": map[string]string{"type": "user", "id": "bob"}, "period": "month",
		"max_tokens": 1_000_000_000_000}, map[string]string{"Authorization": "Bearer gw-admin"}, nil); err != nil || code != 201 {
		b.Fatalf("budget = %d, %v", code, err)
	}
	onB := newClient(nodes[1].c.gateway)
	for _, u := range []string{"alice", "bob"} {
		b.Run(map[string]string{"alice": "none", "bob": "budget"}[u], func(b *testing.B) {
			hdr := map[string]string{"Authorization": "Bearer gw-admin", "X-Gateway-User-Id": u}
			body := map[string]any{"model": "gateway:a-" + u, "messages": []map[string]string{{"role": "user", "content": "hi"}}}
			if !eventually(5*time.Second, func() bool { code, _ := onB.do("POST", "/v1/chat/completions", body, hdr, nil); return code == 200 }) {
				b.Fatal("no turn on b")
			}
			lat := make([]time.Duration, 0, b.N)
			for b.Loop() {
				start := time.Now()
				if code, err := onB.do("POST", "/v1/chat/completions", body, hdr, nil); err != nil || code != 200 {
					b.Fatalf("turn = %d, %v", code, err)
				}
				lat = append(lat, time.Since(start))
			}
			reportLatency(b, lat)
		})
	}
}

// reportLatency reports the p50 and p99 of lat (µs).
func reportLatency(b *testing.B, lat []time.Duration) {
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
}
