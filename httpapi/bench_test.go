package httpapi

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"

	"gatehouse/actors/accounts"
	"gatehouse/actors/keys"
	"gatehouse/bench"
)

// BenchmarkProxyAuthPath measures the proxy's auth+limit path (path parse,
// service lookup, key extraction, Authorize against the real system, rate-limit
// headers) on a reused RequestCtx, as fasthttp reuses it. The "ctx" case
// adds a per-request context.WithTimeout, which the proxy no longer
// derives; "actors" runs the path against the real actor system.
func BenchmarkProxyAuthPath(b *testing.B) {
	b.Run("admit", func(b *testing.B) { benchProxyAuth(b, false) })
	b.Run("admit+ctx", func(b *testing.B) { benchProxyAuth(b, true) })
	b.Run("admit-actors", benchProxyAuthActors)
}

// benchProxyAuthActors is admit against the real actor system, one key.
func benchProxyAuthActors(b *testing.B) {
	sys, secrets := bench.NewSystem(b, 1)
	cfg := DefaultConfig()
	cfg.Services = map[string]Service{"llm": {Upstream: "http://127.0.0.1:1/base"}}
	srv, err := New(cfg, sys.Keys, sys.Accounts, nil, prometheus.NewRegistry(), nil)
	if err != nil {
		b.Fatal(err)
	}
	var req fasthttp.Request
	req.SetRequestURI("/api/proxy/llm/v1/chat/completions?stream=false")
	req.Header.SetHost("api.test")
	req.Header.SetBytesV("X-API-Key", secrets[0])
	var rc fasthttp.RequestCtx
	rc.Init(&req, clientAddr, nil)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, _, _, err := srv.admit(ctx, &rc); err != nil {
			b.Fatal(err)
		}
	}
}

func benchProxyAuth(b *testing.B, withCtx bool) {
	b.Helper()
	e := newTestEnv(b, withoutControl(), withLogger(nil), withWallClock(), withoutServing(),
		withConfig(func(c *Config) { c.Services = map[string]Service{"llm": {Upstream: "http://127.0.0.1:1/base"}} }))
	sys, srv := e.sys, e.srv
	ctx := context.Background()
	u, err := sys.CreateUser(ctx, accounts.NewUser{Email: "b@example.com", Password: "password123", LicenseActive: true})
	if err != nil {
		b.Fatal(err)
	}
	info, secret, err := sys.CreateKey(ctx, keys.NewKey{Owner: sys.KeyOwner(u), Name: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	limit := int64(1_000_000_000)
	if _, err := sys.UpdateKey(ctx, info.ID, keys.KeyPatch{RateLimit: &limit}); err != nil {
		b.Fatal(err)
	}

	var req fasthttp.Request
	req.SetRequestURI("/api/proxy/llm/v1/chat/completions?stream=false")
	req.Header.SetHost("api.test")
	req.Header.Set("X-API-Key", secret)
	var rc fasthttp.RequestCtx
	rc.Init(&req, clientAddr, nil)

	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		c, cancel := ctx, context.CancelFunc(func() {})
		if withCtx {
			c, cancel = context.WithTimeout(ctx, time.Second)
		}
		if _, _, _, err := srv.admit(c, &rc); err != nil {
			b.Fatal(err)
		}
		cancel()
	}
}
