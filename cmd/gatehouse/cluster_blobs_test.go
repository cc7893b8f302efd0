package main

import (
	"archive/zip"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"
	"time"

	"gatehouse/actors/cluster/etcdtest"
)

// TestClusterBlobs: a media file and a skill uploaded on node a are read
// byte-identical on b (which fetches them by hash) and, after kill -9 of
// a, on c (which has the copy a made before acknowledging, or fetches it
// from b); with one node left, an upload is refused 503 UNAVAILABLE and
// records nothing.
func TestClusterBlobs(t *testing.T) {
	etcd := etcdtest.Start(t, 1)
	masterKey := hex.EncodeToString([]byte("blobsblobsblobsblobsblobsblobs12"))
	extra := map[string]any{"gateway": map[string]any{"host": "127.0.0.1", "port": 0, "token": "gw-admin"}}
	var nodes []*clusterNode
	for _, id := range []string{"a", "b", "c"} {
		nodes = append(nodes, startClusterNode(t, id, etcd.Endpoints(), masterKey, extra))
	}
	a, b, c := nodes[0], nodes[1], nodes[2]
	hdr := map[string]string{"Authorization": "Bearer gw-admin", "X-Gateway-User-Id": "alice"}

	rnd := rand.New(rand.NewPCG(1, 2))
	media := make([]byte, 3<<20+123) // 13 chunks
	for i := range media {
		media[i] = byte(rnd.Uint32())
	}
	copy(media, "\x89PNG\r\n\x1a\n") // sniffed as image/png
	notes := make([]byte, 600<<10)
	for i := range notes {
		notes[i] = "0123456789abcdef"[rnd.IntN(16)]
	}
	skill := zipOf(t, map[string][]byte{
		"notes/SKILL.md":       []byte("---\nname: Notes\ndescription: random notes\n---\n# Notes\n"),
		"notes/data/notes.txt": notes,
	})

	var m struct {
		ID, SHA256, URL string
	}
	if code, body := rawDo(t, "POST", a.c.gateway+"/v1/media/upload", media, hdr); code != 201 || json.Unmarshal(body, &m) != nil {
		for _, n := range nodes {
			t.Logf("%s:\n%s", n.id, lastLines(n.c.logs.String(), 30))
		}
		t.Fatalf("media upload on a = %d %s", code, body)
	}
	if want := sha256.Sum256(media); m.SHA256 != hex.EncodeToString(want[:]) {
		t.Fatalf("media sha256 = %s", m.SHA256)
	}
	var sk struct{ ID string }
	if code, body := rawDo(t, "POST", a.c.gateway+"/v1/skills/upload", skill, hdr); code != 201 || json.Unmarshal(body, &sk) != nil {
		t.Fatalf("skill upload on a = %d %s", code, body)
	}
	uploaded := time.Now()

	// read checks that n serves both byte-identical (the records may take
	// a moment to reach it).
	read := func(n *clusterNode) {
		t.Helper()
		var code int
		var got []byte
		if !eventually(10*time.Second, func() bool {
			code, got = rawDo(t, "GET", n.c.gateway+"/v1/media/"+m.ID, nil, hdr)
			return code == 200
		}) || !bytes.Equal(got, media) {
			t.Fatalf("media on %s = %d, %d bytes (identical %v)\n%s", n.id, code, len(got), bytes.Equal(got, media), warnings(n.c.logs.String()))
		}
		code, got = rawDo(t, "GET", n.c.gateway+"/v1/skills/"+sk.ID+"/files/data/notes.txt", nil, hdr)
		if code != 200 || !bytes.Equal(got, notes) {
			t.Fatalf("skill file on %s = %d, %d bytes (identical %v)\n%s", n.id, code, len(got), bytes.Equal(got, notes), warnings(n.c.logs.String()))
		}
	}
	read(b)
	t.Logf("read on b %s after the uploads", time.Since(uploaded).Round(time.Millisecond))

	a.c.kill()
	killed := time.Now()
	read(c)
	t.Logf("read on c %s after kill -9 of a", time.Since(killed).Round(time.Millisecond))

	// One node left (c's lease may still list it for a TTL: either way no
	// second copy): the upload is refused with the documented envelope.
	c.c.kill()
	code, body := rawDo(t, "POST", b.c.gateway+"/v1/media/upload", []byte("lonely bytes"), hdr)
	var env struct {
		Error struct{ Code, Message string }
	}
	if code != 503 || json.Unmarshal(body, &env) != nil || env.Error.Code != "UNAVAILABLE" || !strings.Contains(env.Error.Message, "no other cluster node") {
		t.Fatalf("upload with one node left = %d %s; want 503 UNAVAILABLE", code, body)
	}
	if !eventually(2*time.Second, func() bool { return strings.Contains(b.c.logs.String(), "upload refused: no second copy") }) {
		t.Fatalf("b did not log the refused upload:\n%s", warnings(b.c.logs.String()))
	}
}

func zipOf(t *testing.T, files map[string][]byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for name, body := range files {
		w, err := zw.Create(name)
		if err != nil {
			t.Fatal(err)
		}
		w.Write(body)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// rawDo sends body (nil: none) as application/octet-stream and returns
// the status and the whole answer.
func rawDo(t *testing.T, method, url string, body []byte, hdr map[string]string) (int, []byte) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/octet-stream")
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := (&http.Client{Timeout: 20 * time.Second}).Do(req)
	if err != nil {
		return 0, []byte(fmt.Sprint(err))
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// lastLines is the last n lines of log.
func lastLines(log string, n int) string {
	ls := strings.Split(strings.TrimRight(log, "\n"), "\n")
	return strings.Join(ls[max(0, len(ls)-n):], "\n")
}
