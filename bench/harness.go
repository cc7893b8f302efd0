package bench

import (
	"context"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"gatehouse/actors"
	"gatehouse/actors/accounts"
	"gatehouse/actors/keys"
	"gatehouse/snapshot"
	"gatehouse/wal"
)

// Authorizer is what the auth benchmarks need: keys.Service, or a fake.
type Authorizer interface {
	Authorize(ctx context.Context, secret []byte) keys.AuthResult
}

var _ Authorizer = (*keys.Service)(nil)

// System is a real actor system with its keys and accounts.
type System struct {
	*actors.System
	Keys     *keys.Service
	Accounts *accounts.Service
}

// NewSystem starts a real actor system on a WAL (fsync on, as in
// production) and snapshot store in a temp dir, and closes it when tb
// ends. It creates a licensed premium user and n keys with their limit
// raised so that no benchmark is refused, and returns their secrets.
func NewSystem(tb testing.TB, n int) (System, [][]byte) {
	tb.Helper()
	dir := tb.TempDir()
	wcfg := wal.DefaultConfig()
	wcfg.Path = filepath.Join(dir, "wal.db")
	l, err := wal.Open(wcfg, nil, nil)
	if err != nil {
		tb.Fatal(err)
	}
	snaps, err := snapshot.New(snapshot.Config{Dir: filepath.Join(dir, "snap"), Retain: 2}, nil, nil)
	if err != nil {
		tb.Fatal(err)
	}
	sealer, err := actors.NewSealer(make([]byte, 32))
	if err != nil {
		tb.Fatal(err)
	}
	cfg := actors.DefaultConfig()
	acfg := accounts.DefaultConfig()
	// One user holds every key, as in the suite (StartGatehouse).
	acfg.MaxKeys = map[accounts.Plan]int{accounts.PlanStandard: 1_000_000, accounts.PlanPremium: 1_000_000}
	ks, err := keys.New(keys.DefaultConfig())
	if err != nil {
		tb.Fatal(err)
	}
	acc, err := accounts.New(acfg)
	if err != nil {
		tb.Fatal(err)
	}
	sys, err := actors.New(cfg, actors.Deps{Log: l, Snapshots: snaps, Sealer: sealer}, ks, acc)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := sys.Close(ctx); err != nil {
			tb.Errorf("Close() = %v", err)
		}
		if err := l.Close(); err != nil {
			tb.Errorf("wal Close() = %v", err)
		}
	})
	ctx := context.Background()
	u, err := acc.CreateUser(ctx, accounts.NewUser{Email: "bench@example.com", Password: "bench-password", Plan: accounts.PlanPremium, LicenseActive: true})
	if err != nil {
		tb.Fatal(err)
	}
	limit := int64(1_000_000_000)
	secrets := make([][]byte, n)
	errs := make(chan error, 16)
	for w := range 16 { // concurrent, so that the WAL commits in groups
		go func() {
			var err error
			for i := w; i < n && err == nil; i += 16 {
				var k keys.KeyInfo
				var secret string
				if k, secret, err = ks.CreateKey(ctx, keys.NewKey{Owner: acc.KeyOwner(u), Name: "bench"}); err == nil {
					_, err = ks.UpdateKey(ctx, k.ID, keys.KeyPatch{RateLimit: &limit})
				}
				secrets[i] = []byte(secret)
			}
			errs <- err
		}()
	}
	for range 16 {
		if err := <-errs; err != nil {
			tb.Fatal(err)
		}
	}
	return System{sys, ks, acc}, secrets
}

// Authorize benchmarks a.Authorize from b's parallel goroutines, the
// secrets taken in turn, with the context the proxy passes (no deadline).
func Authorize(b *testing.B, a Authorizer, secrets [][]byte) {
	b.Helper()
	AuthorizeTicked(b, a, secrets, 0, nil)
}

// AuthorizeTicked is Authorize calling tick once every `every`
// authorizations (never when every is 0), from the goroutine whose turn
// it is: each op carries its share of what tick sets off.
func AuthorizeTicked(b *testing.B, a Authorizer, secrets [][]byte, every uint64, tick func()) {
	b.Helper()
	b.ReportAllocs()
	var next atomic.Uint64
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		ctx := context.Background()
		for pb.Next() {
			n := next.Add(1)
			if every > 0 && n%every == 0 {
				tick()
			}
			s := secrets[n%uint64(len(secrets))]
			if res := a.Authorize(ctx, s); res.Err != nil {
				b.Error(res.Err)
				return
			}
		}
	})
}
