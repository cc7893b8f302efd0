package gateway

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"gatehouse/actors/gateway"
)

// TestWorkspaceFiles: what a custom tool writes in its agent's workspace
// is listed, served (type, nosniff, Range, ?token=) and deleted; paths
// that try to leave the workspace (dot segments, encoded dots or slashes,
// NUL, a symlink out) are refused and serve nothing outside it.
func TestWorkspaceFiles(t *testing.T) {
	ws := t.TempDir()
	e := newGWEnv(t, gwOpts{token: gwToken, gw: func(c *gateway.Config) { c.ToolsExecEnabled, c.WorkspaceDir = true, ws }})
	e.must(201, "POST", "/v1/providers", gwToken, `{"name":"echo","provider_type":"echo","settings":{"delay_ms":0}}`)
	e.must(201, "POST", "/v1/agents", gwToken, `{"agent_key":"a1","provider":"echo","model":"m"}`, "X-Gateway-User-Id", "alice")
	alice := e.must(201, "POST", "/v1/api-keys", gwToken, `{"name":"a","scopes":["operator.write"],"user_id":"alice"}`).body["key"].(string)
	bob := e.must(201, "POST", "/v1/api-keys", gwToken, `{"name":"b","scopes":["operator.write"],"user_id":"bob"}`).body["key"].(string)
	e.must(201, "POST", "/v1/tools/custom", gwToken, `{"name":"writer","agent_id":"a1","command":["sh","-c","mkdir -p out && printf hello > out/a.txt && printf '<script>x</script>' > out/p.html && ln -sf /etc/passwd leak && cat > out/args.json"]}`)
	e.must(200, "POST", "/v1/tools/invoke", alice, `{"tool":"writer","agentId":"a1","args":{"n":1}}`)

	l := e.must(200, "GET", "/v1/files?agent_id=a1&prefix=out/", alice, "").body
	var paths []string
	for _, f := range l["data"].([]any) {
		paths = append(paths, f.(map[string]any)["path"].(string))
	}
	if strings.Join(paths, ",") != "a1/out/a.txt,a1/out/args.json,a1/out/p.html" {
		t.Errorf("listed %v", paths)
	}
	if l := e.must(200, "GET", "/v1/files?agent_id=a1", alice, "").body; strings.Contains(fmt.Sprint(l), "leak") {
		t.Errorf("the symlink is listed: %v", l)
	}
	r := e.must(200, "GET", "/v1/files/a1/out/a.txt", alice, "")
	if r.raw != "hello" || !strings.HasPrefix(r.header.Get("Content-Type"), "text/plain") || r.header.Get("X-Content-Type-Options") != "nosniff" || r.header.Get("Content-Length") != "5" {
		t.Errorf("a.txt = %q %v", r.raw, r.header)
	}
	if r := e.do("GET", "/v1/files/a1/out/a.txt", alice, "", "Range", "bytes=1-2"); r.status != 206 || r.raw != "el" {
		t.Errorf("range = %d %q", r.status, r.raw)
	}
	if r := e.do("GET", "/v1/files/a1/out/a.txt?token="+gwToken, "", ""); r.status != 200 || r.raw != "hello" {
		t.Errorf("?token= = %d", r.status)
	}
	if r := e.must(200, "GET", "/v1/files/a1/out/p.html", alice, ""); r.header.Get("Content-Disposition") != "attachment" || r.header.Get("Content-Type") != "application/octet-stream" {
		t.Errorf("html served inline: %v", r.header)
	}
	if r := e.do("GET", "/v1/files/a1/leak", alice, ""); r.status/100 != 4 || strings.Contains(r.raw, "root:") {
		t.Errorf("symlink out of the workspace = %d %q", r.status, r.raw)
	}
	e.must(404, "GET", "/v1/files/a1/out/a.txt", bob, "")
	for _, p := range []string{
		"/v1/files/a1/../../../../etc/passwd", "/v1/files/a1/%2e%2e/%2e%2e/etc/passwd", "/v1/files/a1/out%2fa.txt",
		"/v1/files/a1/x%00", "/v1/files/a1/./out/a.txt", "/v1/storage/a1/../x", "/v1/files/a1//etc/passwd", "/v1/files/a1/..%5c..%5cetc",
	} {
		if code := rawGet(t, e, p); code != 400 {
			t.Errorf("GET %s = %d, want 400", p, code)
		}
	}
	e.must(404, "DELETE", "/v1/storage/a1/out/a.txt", bob, "")
	e.must(204, "DELETE", "/v1/storage/a1/out/a.txt", alice, "")
	e.must(404, "DELETE", "/v1/storage/a1/out/a.txt", alice, "")
	e.must(412, "DELETE", "/v1/storage/a1/out", alice, "") // not empty
}

// rawGet sends path as it is (no client-side cleaning) with the token.
func rawGet(t *testing.T, e *gwEnv, path string) int {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(e.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer %s\r\n\r\n", path, gwToken)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestWorkspaceFIFO: GET of a FIFO in a workspace answers 404 at once,
// and no request stays blocked opening it (on a thread of its own).
func TestWorkspaceFIFO(t *testing.T) {
	ws := t.TempDir()
	e := newGWEnv(t, gwOpts{token: gwToken, gw: func(c *gateway.Config) { c.WorkspaceDir = ws }})
	e.must(201, "POST", "/v1/providers", gwToken, `{"name":"echo","provider_type":"echo","settings":{"delay_ms":0}}`)
	id := e.must(201, "POST", "/v1/agents", gwToken, `{"agent_key":"a1","provider":"echo","model":"m"}`, "X-Gateway-User-Id", "alice").body["id"].(string)
	fifo := filepath.Join(ws, id, "pipe")
	if err := os.MkdirAll(filepath.Dir(fifo), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	// Runs before the server's shutdown: a writer per request still
	// blocked opening the FIFO lets it go.
	t.Cleanup(func() {
		for blockedOpens() > 0 {
			w, err := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0)
			if err != nil {
				return
			}
			w.Close()
		}
	})
	hc := &http.Client{Timeout: 3 * time.Second}
	defer hc.CloseIdleConnections()
	const n = 20
	errs := make(chan error, n)
	for range n {
		go func() {
			req, _ := http.NewRequest("GET", e.url+"/v1/files/a1/pipe", nil)
			req.Header.Set("Authorization", "Bearer "+gwToken)
			resp, err := hc.Do(req)
			if err != nil {
				errs <- err
				return
			}
			resp.Body.Close()
			if resp.StatusCode != 404 {
				err = fmt.Errorf("status %d, want 404", resp.StatusCode)
			}
			errs <- err
		}()
	}
	for range n {
		if err := <-errs; err != nil {
			t.Errorf("GET of a FIFO: %v", err)
		}
	}
	if b := blockedOpens(); b > 0 {
		t.Errorf("%d requests still blocked opening the FIFO", b)
	}
}

// blockedOpens counts goroutines inside a workspace open.
func blockedOpens() int {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	return strings.Count(string(buf), "workspace.(*Service).Open(")
}
