package gateway

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"mime/multipart"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gatehouse/actors/gateway"
)

// onePixelPNG is a 1x1 PNG.
var onePixelPNG = []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00\x1f\x15\xc4\x89\x00\x00\x00\rIDATx\x9cc\xf8\xcf\xc0\xf0\x1f\x00\x05\x00\x01\xff\x89\x99=\x1d\x00\x00\x00\x00IEND\xaeB`\x82")

// postFile posts data as the multipart field file to path.
func postFile(t *testing.T, e *gwEnv, token, path, name string, data []byte) gwResp {
	t.Helper()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	fw, _ := mw.CreateFormFile("file", name)
	fw.Write(data)
	mw.Close()
	return e.do("POST", path, token, buf.String(), "Content-Type", mw.FormDataContentType())
}

// upload posts a media file.
func upload(t *testing.T, e *gwEnv, token, name string, data []byte) gwResp {
	t.Helper()
	return postFile(t, e, token, "/v1/media/upload", name, data)
}

// TestMedia: multipart uploads over real HTTP, served back with a sniffed,
// allow-listed type, nosniff, an ETag, Range; ?token= on media only; a
// 25 MB upload refused from its headers, storing nothing.
func TestMedia(t *testing.T) {
	blobs := t.TempDir()
	e := newGWEnv(t, gwOpts{token: gwToken, gw: func(c *gateway.Config) { c.BlobDir = blobs }})
	alice := e.must(201, "POST", "/v1/api-keys", gwToken, `{"name":"a","scopes":["operator.write"],"user_id":"alice"}`).body["key"].(string)
	bob := e.must(201, "POST", "/v1/api-keys", gwToken, `{"name":"b","scopes":["operator.read"],"user_id":"bob"}`).body["key"].(string)

	r := upload(t, e, alice, "pixel.png", onePixelPNG)
	sum := sha256.Sum256(onePixelPNG)
	if r.status != 201 || r.body["mime_type"] != "image/png" || r.body["size"] != float64(len(onePixelPNG)) || r.body["sha256"] != hex.EncodeToString(sum[:]) {
		t.Fatalf("upload = %d %s", r.status, r.raw)
	}
	url := r.body["url"].(string)
	get := e.do("GET", url, alice, "")
	if get.status != 200 || get.raw != string(onePixelPNG) || get.header.Get("Content-Type") != "image/png" ||
		get.header.Get("X-Content-Type-Options") != "nosniff" || get.header.Get("ETag") == "" {
		t.Errorf("get = %d %v", get.status, get.header)
	}
	if r := e.do("GET", url+"?token="+gwToken, "", ""); r.status != 200 || r.raw != string(onePixelPNG) {
		t.Errorf("with ?token= = %d", r.status)
	}
	if r := e.do("GET", "/v1/agents?token="+gwToken, "", ""); r.status != 401 {
		t.Errorf("?token= elsewhere = %d, want 401", r.status)
	}
	if r := e.do("GET", url, alice, "", "Range", "bytes=1-3"); r.status != 206 || r.raw != string(onePixelPNG[1:4]) || r.header.Get("Content-Range") != fmt.Sprintf("bytes 1-3/%d", len(onePixelPNG)) {
		t.Errorf("range = %d %q %v", r.status, r.raw, r.header)
	}
	if r := e.do("GET", url, alice, "", "Range", "bytes=9999-"); r.status != 416 {
		t.Errorf("unsatisfiable range = %d", r.status)
	}
	if r := e.do("GET", url, alice, "", "If-None-Match", get.header.Get("ETag")); r.status != 304 {
		t.Errorf("If-None-Match = %d", r.status)
	}
	if r := e.do("GET", url, bob, ""); r.status != 404 {
		t.Errorf("bob reading alice's media = %d", r.status)
	}
	if r := upload(t, e, bob, "x.png", onePixelPNG); r.status != 403 {
		t.Errorf("upload with a read key = %d", r.status)
	}
	html := upload(t, e, alice, "page.html", []byte("<html><script>alert(1)</script></html>"))
	if g := e.do("GET", html.body["url"].(string), alice, ""); g.header.Get("Content-Type") != "application/octet-stream" || g.header.Get("Content-Disposition") != "attachment" {
		t.Errorf("html served as %v", g.header)
	}

	// 25 MB: refused from the headers, the client reads the 413.
	before := countFiles(t, blobs)
	conn, err := net.Dial("tcp", strings.TrimPrefix(e.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	start := time.Now()
	fmt.Fprintf(conn, "POST /v1/media/upload HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer %s\r\nContent-Type: image/png\r\nContent-Length: %d\r\n\r\n", alice, 25<<20)
	go func() { _, _ = conn.Write(make([]byte, 25<<20)) }()
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil || resp.StatusCode != 413 || time.Since(start) > 5*time.Second {
		t.Errorf("25 MB upload = %v, %v after %v; want 413 at once", resp, err, time.Since(start))
	}
	if after := countFiles(t, blobs); after != before {
		t.Errorf("blob files %d → %d: a refused upload stored something", before, after)
	}
}

func countFiles(t *testing.T, dir string) int {
	t.Helper()
	n := 0
	_ = filepath.Walk(dir, func(_ string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() {
			n++
		}
		return nil
	})
	return n
}

// TestMediaInChromium: a page elsewhere shows the media through an <img>
// tag with ?token=, as a chat UI would.
func TestMediaInChromium(t *testing.T) {
	chromium := needTool(t, "chromium", "run `make chromium` (Debian package chromium)")
	e := newGWEnv(t, gwOpts{token: gwToken, gw: func(c *gateway.Config) { c.BlobDir = t.TempDir() }})
	url := upload(t, e, gwToken, "pixel.png", onePixelPNG).body["url"].(string)
	page := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `<!doctype html><title>waiting</title><img src="%s%s?token=%s" onload="document.title='loaded '+this.naturalWidth+'x'+this.naturalHeight" onerror="document.title='failed'">`, e.url, url, gwToken)
	}))
	defer page.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
		"--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--disable-dev-shm-usage", "--user-data-dir="+t.TempDir(), "--virtual-time-budget=10000", "--dump-dom", page.URL).Output()
	if err != nil {
		t.Fatalf("chromium: %v", err)
	}
	if !strings.Contains(string(out), "<title>loaded 1x1</title>") {
		t.Errorf("page = %s", out)
	}
}
