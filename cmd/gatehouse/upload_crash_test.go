package main

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestUploadCrash kills the server (kill -9) in the middle of a media
// upload: after a restart nothing of it is stored (no record, no blob, no
// temp file) and uploads work again.
func TestUploadCrash(t *testing.T) {
	dir := t.TempDir()
	cfg := writeConfig(t, dir, map[string]any{"gateway": map[string]any{"host": "127.0.0.1", "port": 0, "token": "gw-admin"}})
	c := startChild(t, cfg)
	conn, err := net.Dial("tcp", strings.TrimPrefix(c.gateway, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(conn, "POST /v1/media/upload HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer gw-admin\r\nContent-Type: application/octet-stream\r\nContent-Length: %d\r\n\r\n", 10<<20)
	if _, err := conn.Write(make([]byte, 5<<20)); err != nil {
		t.Fatal(err)
	}
	// The server is now writing the first half into a temp file.
	tmp := filepath.Join(dir, "blobs", "tmp")
	if !eventually(5*time.Second, func() bool { ents, _ := os.ReadDir(tmp); return len(ents) > 0 }) {
		t.Fatal("the upload never reached the blob store's temp dir")
	}
	c.kill()
	conn.Close()

	c = startChild(t, cfg)
	if ents, _ := os.ReadDir(tmp); len(ents) != 0 {
		t.Errorf("temp files left after restart: %v", ents)
	}
	n := 0
	_ = filepath.Walk(filepath.Join(dir, "blobs", "sha256"), func(_ string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() {
			n++
		}
		return nil
	})
	if n != 0 {
		t.Errorf("%d blobs stored by an upload that never finished", n)
	}
	gc := newClient(c.gateway)
	var act struct{ Total int }
	if code, err := gc.do("GET", "/v1/activity?action=media.upload", nil, map[string]string{"Authorization": "Bearer gw-admin"}, &act); code != 200 || err != nil || act.Total != 0 {
		t.Errorf("media uploads recorded = %d, %d, %v", act.Total, code, err)
	}
	c.stop(t)
}
