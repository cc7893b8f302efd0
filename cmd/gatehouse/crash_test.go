package main

import (
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func listenLoopback() (net.Listener, error) { return net.Listen("tcp", "127.0.0.1:0") }

const crashFlush = 200 * time.Millisecond

// served records, per key, when each admitted proxied request was answered.
type served struct {
	mu    sync.Mutex
	times map[string][]time.Time
}

func (s *served) add(id string, at time.Time) {
	s.mu.Lock()
	s.times[id] = append(s.times[id], at)
	s.mu.Unlock()
}

func (s *served) counts(before time.Time) (all, old map[string]int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	all, old = map[string]int64{}, map[string]int64{}
	for id, ts := range s.times {
		for _, t := range ts {
			all[id]++
			if t.Before(before) {
				old[id]++
			}
		}
	}
	return all, old
}

// crashLoad is what a load run acknowledged before the kill.
type crashLoad struct {
	keys    sync.Map // id → secret of every acknowledged creation
	revoked sync.Map // id → true for every acknowledged revocation
	rotated sync.Map // id → new secret of every acknowledged rotation
	served  served
	failed  atomic.Int64
	// inFlight counts, per key id, the requests cut off by the kill (no
	// answer): each may have been admitted and counted before it.
	inFlight sync.Map // id → *atomic.Int64
}

// TestCrashKill9 drives the real binary over HTTP, SIGKILLs it during load,
// restarts it and checks that every acknowledged change survived and that
// usage lost nothing older than the flush interval and never exceeds what
// was served.
func TestCrashKill9(t *testing.T) {
	up := upstream(t)
	dataDir := t.TempDir()
	cfg := writeConfig(t, dataDir, map[string]any{
		"usage":    map[string]any{"flush_interval": crashFlush.String()},
		"services": map[string]any{"stub": map[string]any{"upstream": up}},
		"snapshot": map[string]any{"every_records": 300},
	})
	c := startChild(t, cfg)
	admin := newClient(c.api)
	admin.login(t, adminEmail, adminPassword)
	load := &crashLoad{served: served{times: map[string][]time.Time{}}}
	for range 8 {
		createKey(t, admin, load)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 16 {
		wg.Add(1)
		go func() { defer wg.Done(); proxyLoop(c.api, load, stop, w) }()
	}
	wg.Add(1)
	go func() { defer wg.Done(); controlLoop(admin, load, stop) }()
	time.Sleep(time.Duration(400+rand.IntN(1200)) * time.Millisecond)
	killedAt := time.Now()
	c.kill()
	close(stop)
	wg.Wait()

	c = startChild(t, cfg)
	verifyAfterCrash(t, c, load, killedAt)
}

func createKey(tb testing.TB, admin *client, load *crashLoad) {
	var k createdKey
	code, err := admin.do("POST", "/api/keys", map[string]string{"name": "crash"}, nil, &k)
	if err == nil && code == 201 {
		load.keys.Store(k.ID, k.Key)
	}
}

func proxyLoop(api string, load *crashLoad, stop chan struct{}, w int) {
	cl := newClient(api)
	var ids []string
	for i := 0; ; i++ {
		select {
		case <-stop:
			return
		default:
		}
		if i%50 == 0 {
			ids = ids[:0]
			load.keys.Range(func(k, _ any) bool { ids = append(ids, k.(string)); return true })
		}
		id := ids[(w+i)%len(ids)]
		secret, _ := load.keys.Load(id)
		code, err := cl.do("GET", "/api/proxy/stub/v1/ping", nil, map[string]string{"X-API-Key": secret.(string)}, nil)
		switch {
		case err != nil:
			load.failed.Add(1)
			n, _ := load.inFlight.LoadOrStore(id, new(atomic.Int64))
			n.(*atomic.Int64).Add(1)
		case code == 200:
			load.served.add(id, time.Now())
		}
	}
}

// controlLoop creates and revokes keys while the proxy load runs.
func controlLoop(admin *client, load *crashLoad, stop chan struct{}) {
	for i := 0; ; i++ {
		select {
		case <-stop:
			return
		case <-time.After(20 * time.Millisecond):
		}
		var k createdKey
		code, err := admin.do("POST", "/api/keys", map[string]string{"name": "churn"}, nil, &k)
		if err != nil || code != 201 {
			continue
		}
		load.keys.Store(k.ID, k.Key)
		switch i % 3 {
		case 0:
			if code, err := admin.do("POST", "/api/keys/"+k.ID+"/revoke", nil, nil, nil); err == nil && code == 200 {
				load.revoked.Store(k.ID, true)
			}
		case 1:
			var rot struct{ Key string }
			if code, err := admin.do("POST", "/api/keys/"+k.ID+"/rotate", nil, nil, &rot); err == nil && code == 200 {
				load.rotated.Store(k.ID, rot.Key)
			}
		}
	}
}

func verifyAfterCrash(t *testing.T, c *child, load *crashLoad, killedAt time.Time) {
	t.Helper()
	admin := newClient(c.api)
	admin.login(t, adminEmail, adminPassword)
	all, old := load.served.counts(killedAt.Add(-2 * crashFlush))
	var keys, requests int64
	load.keys.Range(func(k, _ any) bool {
		id := k.(string)
		keys++
		var d keyDetail
		code, err := admin.do("GET", "/api/keys/"+id, nil, nil, &d)
		if err != nil || code != 200 {
			t.Errorf("acknowledged key %s after restart: %d %v", id, code, err)
			return true
		}
		if _, rev := load.revoked.Load(id); rev && d.Key.IsActive {
			t.Errorf("acknowledged revocation of %s lost", id)
		}
		if secret, ok := load.rotated.Load(id); ok {
			code, err := admin.do("POST", "/api/keys/validate", nil, map[string]string{"X-API-Key": secret.(string)}, nil)
			if err != nil || code != 200 {
				t.Errorf("acknowledged rotation of %s lost: new secret answers %d %v", id, code, err)
			}
		}
		got := d.Key.UsageCount
		requests += all[id]
		// A request the kill cut off may have been admitted and counted
		// (its answer lost), so usage may exceed what was served by those.
		var cut int64
		if n, ok := load.inFlight.Load(id); ok {
			cut = n.(*atomic.Int64).Load()
		}
		if got > all[id]+cut {
			t.Errorf("key %s: usage %d exceeds the %d requests served and %d cut off by the kill", id, got, all[id], cut)
		}
		if got < old[id] {
			t.Errorf("key %s: usage %d lost requests older than 2 flush intervals (%d served by then)", id, got, old[id])
		}
		return true
	})
	if keys < 8 || requests == 0 {
		t.Fatalf("load too small to mean anything: %d keys, %d requests", keys, requests)
	}
	t.Logf("verified %d keys, %d served requests, %d failed in flight at the kill", keys, requests, load.failed.Load())
}
