package httpapi

import (
	"strings"
	"testing"

	"gatehouse/httpapi/console"
)

// TestConsoleRoutes: the console's page and assets on the listener, the
// root sending browsers to it, and nothing else under its prefix.
func TestConsoleRoutes(t *testing.T) {
	w := newTestEnv(t, withWorld())
	tests := []struct {
		method, path string
		status       int
		header, want string // a response header that must contain want
	}{
		{"GET", "/", 302, "Location", "/console/"},
		{"GET", "/console", 302, "Location", "/console/"},
		{"GET", "/console/", 200, "Content-Security-Policy", console.CSP},
		{"HEAD", "/console/", 200, "Content-Type", "text/html"},
		{"GET", "/console/assets/app.js", 200, "Content-Type", "javascript"},
		{"POST", "/console/", 405, "Content-Type", "application/json"},
		{"GET", "/console/assets/missing.js", 404, "Content-Type", "application/json"},
		{"GET", "/consoles", 404, "Content-Type", "application/json"},
		{"GET", "/console/assets/../../api/keys", 404, "Content-Type", "application/json"},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			r := w.do(t, request{method: tt.method, path: tt.path})
			if r.status != tt.status {
				t.Fatalf("status = %d, want %d: %s", r.status, tt.status, r.body)
			}
			if got := r.headers[tt.header]; !strings.Contains(got, tt.want) {
				t.Errorf("%s = %q, want %q in it", tt.header, got, tt.want)
			}
		})
	}
}
