package gateway

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/fasthttp/websocket"

	"gatehouse/actors/clock"
	"gatehouse/actors/gateway"
)

// TestWSCredentialRecheck: a key revoked (through the API) or expired
// while its connection is open fails the connection's next request with
// UNAUTHORIZED, and the server then closes 1008; a connection on the
// gateway token goes on.
func TestWSCredentialRecheck(t *testing.T) {
	clk := clock.NewFake(time.Now())
	e := newGWEnv(t, gwOpts{token: gwToken, clk: clk})
	admin := dialWS(t, e)
	admin.mustOK("connect", map[string]any{"token": gwToken})
	tests := []struct {
		name    string
		expires string
		end     func(id string)
	}{
		{"revoked", "", func(id string) { e.must(204, "DELETE", "/v1/api-keys/"+id, gwToken, "") }},
		{"expired", `,"expires_in":60`, func(string) { clk.Advance(61 * time.Second) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := e.must(201, "POST", "/v1/api-keys", gwToken, `{"name":"k","scopes":["operator.read"],"user_id":"alice"`+tt.expires+`}`)
			w := dialWS(t, e)
			w.mustOK("connect", map[string]any{"token": r.body["key"].(string)})
			w.mustOK("providers.list", nil)
			tt.end(r.body["id"].(string))
			f, _ := w.call("providers.list", nil)
			if f.OK || f.Error == nil || f.Error.Code != codeUnauthorized {
				t.Fatalf("providers.list after the key ended = %+v, want UNAUTHORIZED", f)
			}
			if code := w.closeCode(); code != websocket.ClosePolicyViolation {
				t.Errorf("close code = %d, want %d", code, websocket.ClosePolicyViolation)
			}
		})
	}
	admin.mustOK("providers.list", nil) // the gateway token is fixed for the server's life
}

// TestWSFileBodies: media.get and files.get answer the bytes (base64 in
// body), and 200 calls of each leave no file descriptor open.
func TestWSFileBodies(t *testing.T) {
	wsDir := t.TempDir()
	e := newGWEnv(t, gwOpts{token: gwToken, gw: func(c *gateway.Config) { c.BlobDir, c.WorkspaceDir = t.TempDir(), wsDir }})
	e.must(201, "POST", "/v1/providers", gwToken, `{"name":"echo","provider_type":"echo","settings":{"delay_ms":0}}`)
	agent := e.must(201, "POST", "/v1/agents", gwToken, `{"agent_key":"a1","provider":"echo","model":"m"}`, "X-Gateway-User-Id", "alice").body
	alice := e.must(201, "POST", "/v1/api-keys", gwToken, `{"name":"a","scopes":["operator.write"],"user_id":"alice"}`).body["key"].(string)
	media := upload(t, e, alice, "pixel.png", onePixelPNG).body["id"].(string)
	bin := []byte("\x00\xff\xfe binary, not UTF-8 \x80")
	dir := filepath.Join(wsDir, agent["id"].(string), "out")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "r.bin"), bin, 0o600); err != nil {
		t.Fatal(err)
	}

	w := dialWS(t, e)
	w.mustOK("connect", map[string]any{"token": alice})
	tests := []struct {
		method, ctype string
		params        map[string]any
		want          []byte
	}{
		{"media.get", "image/png", map[string]any{"id": media}, onePixelPNG},
		{"files.get", "application/octet-stream", map[string]any{"path": "a1/out/r.bin"}, bin},
	}
	get := func(method string, params any) wsBody {
		t.Helper()
		var b wsBody
		if err := json.Unmarshal(w.mustOK(method, params), &b); err != nil {
			t.Fatalf("%s: %v", method, err)
		}
		return b
	}
	for _, tt := range tests {
		if b := get(tt.method, tt.params); string(b.Body) != string(tt.want) || b.ContentType != tt.ctype {
			t.Errorf("%s = %q %q, want %q %q", tt.method, b.ContentType, b.Body, tt.ctype, tt.want)
		}
	}
	before := openFDs(t)
	for range 200 {
		for _, tt := range tests {
			get(tt.method, tt.params)
		}
	}
	if after := openFDs(t); after > before+20 {
		t.Errorf("open fds: %d before 400 calls, %d after", before, after)
	}
}

// openFDs counts the process's open file descriptors.
func openFDs(tb testing.TB) int {
	tb.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		tb.Skipf("no /proc/self/fd: %v", err)
	}
	return len(fds)
}
