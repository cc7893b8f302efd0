package main

import (
	"strings"
	"testing"
)

// TestDemoEcho: with --demo-echo (GATEHOUSE_DEMO_ECHO=1) the proxy has a
// service to call out of the box, which never sees the caller's key; an
// unknown service's 404 names the configured ones.
func TestDemoEcho(t *testing.T) {
	t.Setenv("GATEHOUSE_DEMO_ECHO", "1")
	c := startChild(t, writeConfig(t, t.TempDir(), nil))
	admin := newClient(c.api)
	admin.login(t, adminEmail, adminPassword)
	var k createdKey
	if code, err := admin.do("POST", "/api/keys", map[string]string{"name": "demo"}, nil, &k); code != 201 || err != nil {
		t.Fatalf("create key = %d, %v", code, err)
	}
	var echo struct {
		Echo        bool
		Path, Query string
		HeaderNames []string `json:"header_names"`
	}
	code, err := newClient(c.api).do("GET", "/api/proxy/echo/v1/hello?x=1", nil, map[string]string{"X-API-Key": k.Key}, &echo)
	if code != 200 || err != nil || !echo.Echo || echo.Path != "/v1/hello" || echo.Query != "x=1" {
		t.Fatalf("echo = %d %+v %v", code, echo, err)
	}
	for _, h := range echo.HeaderNames {
		if strings.EqualFold(h, "X-API-Key") {
			t.Error("the upstream saw the gatehouse key")
		}
	}
	var e struct{ Error, Message string }
	if code, _ := newClient(c.api).do("GET", "/api/proxy/nope/v1/x", nil, map[string]string{"X-API-Key": k.Key}, &e); code != 404 || !strings.Contains(e.Message, "echo") {
		t.Errorf("unknown service = %d %+v, want 404 naming echo", code, e)
	}
	c.stop(t)
}
