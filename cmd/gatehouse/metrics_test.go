package main

import (
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"
)

// TestMetricsListeners (issue 14): each listener serves its own series;
// the API listener's /metrics needs an admin session; server.metrics_addr
// serves the same series without authentication, for scrapers.
func TestMetricsListeners(t *testing.T) {
	// Its own data dir and ports: independent of the others, mostly waiting on its process.
	t.Parallel()
	cfg := writeConfig(t, t.TempDir(), map[string]any{
		"server":  map[string]any{"host": "127.0.0.1", "port": 0, "metrics_addr": "127.0.0.1:0"},
		"gateway": map[string]any{"host": "127.0.0.1", "port": 0},
	})
	// The gateway token as a flag: /debug/pprof/cmdline must not show it.
	env := append(os.Environ(), "GATEHOUSE_ADMIN_EMAIL="+adminEmail, "GATEHOUSE_ADMIN_PASSWORD="+adminPassword)
	c := startServe(t, "", env, "serve", "--config", cfg, "--gateway-token", "gw-admin")
	var metricsBase string
	select {
	case metricsBase = <-c.metrics:
	case <-time.After(10 * time.Second):
		t.Fatal("no metrics listener")
	}
	get := func(url string, hdr map[string]string, cl *client) (int, string) {
		t.Helper()
		req, _ := http.NewRequest("GET", url, nil)
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		hc := http.DefaultClient
		if cl != nil {
			hc = cl.hc
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, _ := get(c.api+"/metrics", nil, nil); code != 401 {
		t.Errorf("anonymous API /metrics = %d, want 401", code)
	}
	admin := newClient(c.api)
	admin.login(t, adminEmail, adminPassword)
	code, api := get(c.api+"/metrics", nil, admin)
	if code != 200 || !strings.Contains(api, "gatehouse_wal_appended_records_total") || strings.Contains(api, `listener="gateway"`) || strings.Contains(api, "gatehouse_gateway_") {
		t.Errorf("admin API /metrics = %d, want the WAL's series and none of the gateway's:\n%.2000s", code, api)
	}
	code, scraped := get(metricsBase+"/metrics", nil, nil)
	if code != 200 || !strings.Contains(scraped, "gatehouse_wal_appended_records_total") || !strings.Contains(scraped, "process_resident_memory_bytes") {
		t.Errorf("metrics_addr /metrics = %d:\n%.2000s", code, scraped)
	}
	if code, _ := get(c.gateway+"/metrics", nil, nil); code != 401 {
		t.Errorf("anonymous gateway /metrics = %d, want 401", code)
	}
	code, gw := get(c.gateway+"/metrics", map[string]string{"Authorization": "Bearer gw-admin"}, nil)
	if code != 200 || !strings.Contains(gw, `listener="gateway"`) || !strings.Contains(gw, "gatehouse_gateway_live_bucket_actors") ||
		strings.Contains(gw, "gatehouse_wal_") || strings.Contains(gw, `listener="api"`) {
		t.Errorf("gateway /metrics = %d, want its own series only:\n%.2000s", code, gw)
	}
	// Issue 35: net/http/pprof on the metrics listener, and only there.
	code, index := get(metricsBase+"/debug/pprof/", nil, nil)
	if code != 200 || !strings.Contains(index, "goroutine") || !strings.Contains(index, "heap") {
		t.Errorf("metrics_addr /debug/pprof/ = %d, want the list of profiles:\n%.2000s", code, index)
	}
	if code, heap := get(metricsBase+"/debug/pprof/heap?debug=1", nil, nil); code != 200 || !strings.HasPrefix(heap, "heap profile:") {
		t.Errorf("metrics_addr /debug/pprof/heap?debug=1 = %d, want a heap profile:\n%.500s", code, heap)
	}
	// A CPU profile is gzipped protobuf: the gzip magic, and some bytes.
	if code, cpu := get(metricsBase+"/debug/pprof/profile?seconds=1", nil, nil); code != 200 || len(cpu) < 100 || !strings.HasPrefix(cpu, "\x1f\x8b") {
		t.Errorf("metrics_addr /debug/pprof/profile?seconds=1 = %d, %d bytes, want a gzipped CPU profile", code, len(cpu))
	}
	if code, cmdline := get(metricsBase+"/debug/pprof/cmdline", nil, nil); code != 200 || !strings.Contains(cmdline, "--gateway-token\x00[redacted]") || strings.Contains(cmdline, "gw-admin") {
		t.Errorf("metrics_addr /debug/pprof/cmdline = %d, want the command line with the token redacted: %q", code, cmdline)
	}
	for _, u := range []string{c.api, c.gateway} {
		for _, p := range []string{"/debug/pprof/", "/debug/pprof/heap?debug=1"} {
			if code, body := get(u+p, nil, admin); code != 404 {
				t.Errorf("public listener %s%s = %d, want 404:\n%.300s", u, p, code, body)
			}
		}
	}
}
