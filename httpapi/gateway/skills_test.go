package gateway

import (
	"archive/zip"
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"gatehouse/actors/gateway"
)

func skillZip(t *testing.T, files map[string]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for name, body := range files {
		w, err := zw.Create(name)
		if err != nil {
			t.Fatal(err)
		}
		io.WriteString(w, body)
	}
	zw.Close()
	return buf.Bytes()
}

func uploadSkill(t *testing.T, e *gwEnv, token string, data []byte) gwResp {
	t.Helper()
	return postFile(t, e, token, "/v1/skills/upload", "skill.zip", data)
}

// promptStub is an OpenAI-compatible upstream that records what it is sent.
type promptStub struct {
	mu   sync.Mutex
	last map[string]any
}

func (p *promptStub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var req map[string]any
	_ = json.NewDecoder(r.Body).Decode(&req)
	p.mu.Lock()
	p.last = req
	p.mu.Unlock()
	fmt.Fprint(w, `{"choices":[{"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1}}`)
}

func (p *promptStub) sent() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	b, _ := json.Marshal(p.last)
	return string(b)
}

// TestSkills: uploads over real multipart HTTP (a skill, a new version,
// every refusal: traversal, a real zip bomb, no SKILL.md, a system skill's
// slug, 25 MB), listing, files, metadata, toggle, system skills that
// cannot be deleted, grants, and a granted skill changing what the
// agent's provider receives.
func TestSkills(t *testing.T) {
	e := newGWEnv(t, gwOpts{token: gwToken, gw: func(c *gateway.Config) { c.BlobDir = t.TempDir() }})
	stub := &promptStub{}
	srv := httptest.NewServer(stub)
	defer srv.Close()
	e.must(201, "POST", "/v1/providers", gwToken, `{"name":"stub","provider_type":"openai_compat","api_base":"`+srv.URL+`/v1"}`)
	e.must(201, "POST", "/v1/providers", gwToken, `{"name":"echo","provider_type":"echo","settings":{"delay_ms":0}}`)
	e.must(201, "POST", "/v1/agents", gwToken, `{"agent_key":"reader","provider":"stub","model":"m"}`, "X-Gateway-User-Id", "alice")
	e.must(201, "POST", "/v1/agents", gwToken, `{"agent_key":"e1","provider":"echo","model":"m"}`, "X-Gateway-User-Id", "alice")
	alice := e.must(201, "POST", "/v1/api-keys", gwToken, `{"name":"a","scopes":["operator.write"],"user_id":"alice"}`).body["key"].(string)

	md := "---\nname: PDF Tools\ndescription: read PDF files with pdftotext\ntags: [pdf]\n---\n# PDF tools\n"
	r := uploadSkill(t, e, gwToken, skillZip(t, map[string]string{"pdf/SKILL.md": md, "pdf/scripts/run.sh": "pdftotext $1 -"}))
	if r.status != 201 || r.body["slug"] != "pdf-tools" || r.body["version"] != 1.0 {
		t.Fatalf("upload = %d %s", r.status, r.raw)
	}
	r = uploadSkill(t, e, gwToken, skillZip(t, map[string]string{"SKILL.md": strings.Replace(md, "read PDF", "read and split PDF", 1)}))
	if r.status != 201 || r.body["version"] != 2.0 || r.body["description"] != "read and split PDF files with pdftotext" {
		t.Errorf("new version = %d %s", r.status, r.raw)
	}
	if v := e.must(200, "GET", "/v1/skills/pdf-tools/versions", alice, "").body["data"].([]any); len(v) != 2 || v[0].(map[string]any)["sha256"] == "" {
		t.Errorf("versions = %v", v)
	}
	for _, tt := range []struct {
		name   string
		zip    []byte
		status int
		want   string
	}{
		{"zip slip", skillZip(t, map[string]string{"SKILL.md": md, "../../evil.sh": "x"}), 400, ".."},
		{"zip bomb", zipBombBytes(t, md), 400, "inflate"},
		{"no SKILL.md", skillZip(t, map[string]string{"README.md": "x"}), 400, "SKILL.md"},
		{"system slug", skillZip(t, map[string]string{"SKILL.md": "---\nname: gatehouse-tools\n---\nx"}), 409, "system"},
	} {
		if r := uploadSkill(t, e, gwToken, tt.zip); r.status != tt.status || !strings.Contains(r.errMsg(), tt.want) {
			t.Errorf("%s: %d %s", tt.name, r.status, r.raw)
		}
	}
	if r := uploadSkill(t, e, alice, skillZip(t, map[string]string{"SKILL.md": md})); r.status != 403 {
		t.Errorf("upload by a write key = %d", r.status)
	}
	// 25 MB, refused from its headers.
	conn, err := net.Dial("tcp", strings.TrimPrefix(e.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	fmt.Fprintf(conn, "POST /v1/skills/upload HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer %s\r\nContent-Type: application/zip\r\nContent-Length: %d\r\n\r\n", gwToken, 25<<20)
	go func() { _, _ = conn.Write(make([]byte, 25<<20)) }()
	if resp, err := http.ReadResponse(bufio.NewReader(conn), nil); err != nil || resp.StatusCode != 413 || time.Since(start) > 5*time.Second {
		t.Errorf("25 MB skill = %v, %v", resp, err)
	}
	conn.Close()

	if l := e.must(200, "GET", "/v1/skills?system=true", alice, "").body["data"].([]any); len(l) != 1 || l[0].(map[string]any)["slug"] != "gatehouse-tools" {
		t.Errorf("system skills = %v", l)
	}
	if l := e.must(200, "GET", "/v1/skills?tag=pdf&search=split", alice, "").body["data"].([]any); len(l) != 1 {
		t.Errorf("tag and search = %v", l)
	}
	if f := e.must(200, "GET", "/v1/skills/pdf-tools/files?version=1", alice, "").body["data"].([]any); len(f) != 2 {
		t.Errorf("files of v1 = %v", f)
	}
	if r := e.must(200, "GET", "/v1/skills/pdf-tools/files/scripts/run.sh?version=1", alice, ""); r.raw != "pdftotext $1 -" || r.header.Get("X-Content-Type-Options") != "nosniff" {
		t.Errorf("file = %q %v", r.raw, r.header)
	}
	e.must(200, "PUT", "/v1/skills/pdf-tools", gwToken, `{"tags":["pdf","docs"],"visibility":"private"}`)
	e.must(404, "GET", "/v1/skills/pdf-tools", alice, "") // private: its uploader's (here the token's) only
	e.must(200, "PUT", "/v1/skills/pdf-tools", gwToken, `{"visibility":"public"}`)
	e.must(403, "DELETE", "/v1/skills/gatehouse-tools", gwToken, "")
	e.must(403, "POST", "/v1/skills/gatehouse-tools/toggle", gwToken, "")

	// Granted, the skill reaches the provider; disabled, it does not.
	e.must(201, "POST", "/v1/skills/pdf-tools/grants/agent", gwToken, `{"agent_id":"reader"}`)
	if l := e.must(200, "GET", "/v1/agents/reader/skills", alice, "").body["data"].([]any); !strings.Contains(fmt.Sprint(l), "granted:true") {
		t.Errorf("agent skills = %v", l)
	}
	e.chat(alice, "reader", "hello")
	if sent := stub.sent(); !strings.Contains(sent, "pdf-tools: read and split PDF") || !strings.Contains(sent, "skill_read") {
		t.Errorf("the provider did not see the skill: %s", sent)
	}
	e.must(200, "POST", "/v1/skills/pdf-tools/toggle", gwToken, "")
	e.chat(alice, "reader", "hello")
	if sent := stub.sent(); strings.Contains(sent, "pdf-tools") {
		t.Errorf("a disabled skill reached the provider: %s", sent)
	}
	e.must(201, "POST", "/v1/skills/gatehouse-tools/grants/agent", gwToken, `{"agent_id":"e1"}`)
	if got := e.chat(alice, "e1", `/tool skill_read {"skill":"gatehouse-tools"}`); !strings.Contains(got, "Using your tools") {
		t.Errorf("skill_read = %q", got)
	}
	e.must(204, "DELETE", "/v1/skills/pdf-tools/grants/agent/reader", gwToken, "")
	e.must(204, "DELETE", "/v1/skills/pdf-tools", gwToken, "")
	e.must(404, "GET", "/v1/skills/pdf-tools", alice, "")
}

// zipBombBytes is a small archive whose second entry inflates to 60 MB.
func zipBombBytes(t *testing.T, md string) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	w, _ := zw.Create("SKILL.md")
	io.WriteString(w, md)
	w, _ = zw.Create("zeros.bin")
	zero := make([]byte, 1<<20)
	for range 60 {
		w.Write(zero)
	}
	zw.Close()
	if buf.Len() > 200<<10 {
		t.Fatalf("bomb of %d bytes", buf.Len())
	}
	return buf.Bytes()
}
