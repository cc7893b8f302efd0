package main

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestStartErrors: what stops a start names the flag or variable to fix,
// and no internal prefix ("actors: invalid argument").
func TestStartErrors(t *testing.T) {
	// Its own data dir and ports: independent of the others, mostly waiting on its process.
	t.Parallel()
	tests := []struct {
		name string
		env  []string
		args []string
		want string
	}{
		{"port not a number", []string{"GATEHOUSE_PORT=abc"}, nil, "GATEHOUSE_PORT=abc: server.port must be an integer"},
		{"gateway port flag", nil, []string{"--gateway-port", "x"}, "--gateway-port=x: gateway.port must be an integer"},
		{"one port for both", nil, []string{"--port", "18999", "--gateway-port", "18999"},
			"gateway.port must differ from server.port (18999): the two listeners cannot share a port"},
		{"short admin password", []string{"GATEHOUSE_ADMIN_PASSWORD=short"}, []string{"--port", "0", "--gateway-port", "0"},
			"GATEHOUSE_ADMIN_PASSWORD: password must be "},
		{"bad admin email", []string{"GATEHOUSE_ADMIN_EMAIL=root"}, []string{"--port", "0", "--gateway-port", "0"},
			"GATEHOUSE_ADMIN_EMAIL: email must be an address"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := append([]string{"serve", "--data-dir", t.TempDir()}, tt.args...)
			code, _, stderr := runSplit(t, "", tt.env, args...)
			if code == 0 || !strings.Contains(stderr, tt.want) || strings.Contains(stderr, "actors:") {
				t.Errorf("= %d, want an error with %q and no internal prefix:\n%s", code, tt.want, stderr)
			}
		})
	}
}

// TestResetPasswordWrongDir: reset-password on a directory that holds no
// data refuses, and creates nothing.
func TestResetPasswordWrongDir(t *testing.T) {
	// Its own data dir and ports: independent of the others, mostly waiting on its process.
	t.Parallel()
	typo := filepath.Join(t.TempDir(), "dta")
	code, _, stderr := runSplit(t, "", []string{"GATEHOUSE_ADMIN_PASSWORD=a-brand-new-password"}, "reset-password", "--data-dir", typo)
	if code == 0 || !strings.Contains(stderr, "holds no gatehouse data") || !strings.Contains(stderr, "--data-dir") {
		t.Errorf("reset-password on %s = %d:\n%s", typo, code, stderr)
	}
	if _, err := os.Stat(typo); !os.IsNotExist(err) {
		t.Errorf("reset-password created %s (%v)", typo, err)
	}
	dir := t.TempDir()
	startChild(t, writeConfig(t, dir, nil)).stop(t)
	code, _, stderr = runSplit(t, "", []string{"GATEHOUSE_ADMIN_EMAIL=nobody@example.com"}, "reset-password", "--data-dir", dir)
	if code == 0 || !strings.Contains(stderr, "no user nobody@example.com") || strings.Contains(stderr, "actors:") {
		t.Errorf("reset-password of an unknown admin = %d:\n%s", code, stderr)
	}
}

// TestFirstStartHints: a start says where to go (the ready record), warns
// about open mode without a gateway token, and warns that
// GATEHOUSE_ADMIN_PASSWORD is ignored once the admin exists, naming
// reset-password.
func TestFirstStartHints(t *testing.T) {
	// Its own data dir and ports: independent of the others, mostly waiting on its process.
	t.Parallel()
	dir := t.TempDir()
	c := startChild(t, writeConfig(t, dir, nil))
	var ready struct{ Console, APIDocs, GatewayDocs string }
	if !eventually(5*time.Second, func() bool { return strings.Contains(c.logs.String(), `"msg":"ready"`) }) {
		t.Fatalf("no ready record:\n%s", c.logs.String())
	}
	for _, line := range strings.Split(c.logs.String(), "\n") {
		var rec map[string]any
		if json.Unmarshal([]byte(line), &rec) == nil && rec["msg"] == "ready" {
			ready.Console, _ = rec["console"].(string)
			ready.APIDocs, _ = rec["api_docs"].(string)
			ready.GatewayDocs, _ = rec["gateway_docs"].(string)
		}
	}
	if ready.Console != c.api+"/" || ready.APIDocs != c.api+"/api/docs" || ready.GatewayDocs != c.gateway+"/docs" {
		t.Errorf("ready = %+v, want %s/, %s/api/docs, %s/docs", ready, c.api, c.api, c.gateway)
	}
	if !strings.Contains(c.logs.String(), "open mode") {
		t.Errorf("no open-mode warning without a gateway token:\n%s", c.logs.String())
	}
	c.stop(t)

	env := append(os.Environ(), "GATEHOUSE_ADMIN_EMAIL="+adminEmail, "GATEHOUSE_ADMIN_PASSWORD=another-password")
	c = startServe(t, "", env, "serve", "--config", writeConfig(t, dir, map[string]any{"gateway": map[string]any{"host": "127.0.0.1", "port": 0, "token": "tok"}}))
	if !eventually(5*time.Second, func() bool { return strings.Contains(c.logs.String(), "GATEHOUSE_ADMIN_PASSWORD ignored") }) ||
		!strings.Contains(c.logs.String(), "gatehouse reset-password") {
		t.Errorf("no warning that GATEHOUSE_ADMIN_PASSWORD is ignored:\n%s", c.logs.String())
	}
	if strings.Contains(c.logs.String(), "open mode") {
		t.Errorf("open-mode warning with a token:\n%s", c.logs.String())
	}
	c.stop(t)
}

// TestAnnounceText: a text log gets the banner with every address; the
// effective config is logged one setting per attribute, secrets masked.
func TestAnnounceText(t *testing.T) {
	cfg := defaultConfig()
	cfg.Gateway.Token = "s3cret-token"
	var out, logs bytes.Buffer
	lg := slog.New(slog.NewTextHandler(&logs, nil))
	api := &net.TCPAddr{IP: net.IPv4zero, Port: 8080}
	gw := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 18790}
	announce(cfg, api, gw, lg, &out)
	for _, want := range []string{"http://127.0.0.1:8080/\n", "http://127.0.0.1:8080/api/docs", "http://127.0.0.1:18790/v1/", "http://127.0.0.1:18790/docs?token=<gateway token>"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("banner lacks %q:\n%s", want, out.String())
		}
	}
	if logs.Len() != 0 {
		t.Errorf("a warning with a token: %s", logs.String())
	}
	lg.Info("starting", slog.Group("config", cfg.maskedAttrs()...))
	for _, want := range []string{" config.server.port=8080 ", " config.gateway.token=*** ", " config.gateway.quotas.media_bytes_per_user=1073741824 ", ` config.keys.rotation_grace_period=24h0m0s `} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("config log lacks %q:\n%s", want, logs.String())
		}
	}
	if strings.Contains(logs.String(), "s3cret") {
		t.Errorf("config log shows the token: %s", logs.String())
	}
}

// TestPortTaken: a port in use names the flag to choose another.
func TestPortTaken(t *testing.T) {
	// Its own data dir and ports: independent of the others, mostly waiting on its process.
	t.Parallel()
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	port := busy.Addr().(*net.TCPAddr).Port
	for _, tt := range []struct{ flag, want string }{{"--port", "--port or GATEHOUSE_PORT"}, {"--gateway-port", "--gateway-port or GATEHOUSE_GATEWAY_PORT"}} {
		args := []string{"serve", "--data-dir", t.TempDir(), "--port", "0", "--gateway-port", "0", tt.flag, strconv.Itoa(port)}
		code, _, stderr := runSplit(t, "", nil, args...)
		if code == 0 || !strings.Contains(stderr, "address already in use") || !strings.Contains(stderr, tt.want) {
			t.Errorf("%s on a busy port = %d:\n%s", tt.flag, code, stderr)
		}
	}
}

// TestVersionStamped: `make build` stamps the version and commit, also
// when Go records no VCS data (-buildvcs=false).
func TestVersionStamped(t *testing.T) {
	mk := lookTool(t, "make", "install make")
	git := lookTool(t, "git", "install git")
	head, err := exec.Command(git, "rev-parse", "HEAD").Output()
	if err != nil {
		t.Skipf("not a git checkout: %v", err)
	}
	bin := filepath.Join(t.TempDir(), "gatehouse")
	cmd := exec.Command(mk, "build", "BIN="+bin)
	cmd.Dir = "../.."
	cmd.Env = append(os.Environ(), "GOFLAGS=-buildvcs=false")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "--version").Output()
	if err != nil || !strings.Contains(string(out), "commit "+strings.TrimSpace(string(head))) || strings.Contains(string(out), "(devel)") {
		t.Errorf("version = %q (%v), want commit %s", out, err, head)
	}
}

// TestMakeDebsWithoutRoot: the Makefile installs Debian packages only as
// root where apt-get exists; otherwise it names what is missing and goes
// on, or fails under CI=true.
func TestMakeDebsWithoutRoot(t *testing.T) {
	mk := lookTool(t, "make", "install make")
	for _, tt := range []struct {
		name, uid, ci string
		fail          bool
	}{{"user", "1000", "", false}, {"user under CI", "1000", "true", true}, {"root without apt-get", "0", "", false}} {
		t.Run(tt.name, func(t *testing.T) {
			bin := t.TempDir() // the PATH: only a fake id, so every tool is missing
			if err := os.WriteFile(filepath.Join(bin, "id"), []byte("#!/bin/sh\necho "+tt.uid+"\n"), 0o755); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(mk, "--no-print-directory", "test-debs")
			cmd.Dir, cmd.Env = "../..", []string{"PATH=" + bin, "CI=" + tt.ci, "HOME=" + t.TempDir()}
			out, err := cmd.CombinedOutput()
			if (err != nil) != tt.fail {
				t.Fatalf("make test-debs: %v, want failure %v\n%s", err, tt.fail, out)
			}
			for _, want := range []string{"missing: curl jq zip openssl bwrap", "Debian packages: curl jq zip openssl bubblewrap", "TestREADME"} {
				if !strings.Contains(string(out), want) {
					t.Errorf("output lacks %q:\n%s", want, out)
				}
			}
			if strings.Contains(string(out), "apt-get update") {
				t.Errorf("ran apt-get:\n%s", out)
			}
		})
	}
}
