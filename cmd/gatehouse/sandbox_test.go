package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"gatehouse/actors/gateway/toolexec"
	"gatehouse/actors/gateway/toolexec/toolexectest"
)

func TestToolsSandboxConfig(t *testing.T) {
	if got := defaultConfig().Tools.Sandbox; got != toolexec.SandboxBwrap {
		t.Errorf("default tools.sandbox = %q, want bwrap", got)
	}
	tests := []struct {
		name string
		set  func(c *fileConfig)
		want string // "" valid
	}{
		{"none", func(c *fileConfig) { c.Tools.Sandbox = "none" }, ""},
		{"unknown", func(c *fileConfig) { c.Tools.Sandbox = "docker" }, `tools.sandbox must be "bwrap" or "none"`},
		{"empty", func(c *fileConfig) { c.Tools.Sandbox = "" }, "tools.sandbox"},
		{"relative path", func(c *fileConfig) { c.Tools.SandboxPaths = []string{"/opt/node", "lib"} }, "tools.sandbox_paths must be absolute paths"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := defaultConfig()
			tt.set(&c)
			err := c.validate()
			if tt.want == "" && err != nil || tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)) {
				t.Errorf("validate() = %v, want %q", err, tt.want)
			}
		})
	}
	c := defaultConfig()
	c.DataDir, c.MasterKeyFile, c.file = "rel/data", "/srv/keys/master.key", "/etc/gatehouse.json"
	sc := sandboxConfig(c)
	abs, _ := filepath.Abs("rel/data")
	for _, p := range []string{abs, "/srv/keys/master.key", "/etc/gatehouse.json"} {
		if !slices.Contains(sc.Hide, p) {
			t.Errorf("sandbox hides %q, want %s among them", sc.Hide, p)
		}
	}
}

// TestToolsSandboxed: the real binary runs custom tools in bwrap by
// default: a tool that reads the server's environment (its parent, pid 1)
// and the data dir around its workspace finds neither the bootstrap
// admin's password nor the master key.
func TestToolsSandboxed(t *testing.T) {
	// Its own data dir and ports: independent of the others, mostly waiting on its process.
	t.Parallel()
	toolexectest.Bwrap(t, toolexec.SandboxConfig{}) // skips without bwrap, fails under CI
	dir := t.TempDir()
	c := startChild(t, writeConfig(t, dir, toolsConfig(nil)))
	key, err := os.ReadFile(filepath.Join(dir, "master.key"))
	if err != nil {
		t.Fatal(err)
	}
	out, status := invokeProbe(t, c, "cat /proc/$PPID/environ; cat /proc/1/environ; ls -a ../..; cat ../../master.key; true")
	if status != 200 {
		t.Fatalf("invoke = %d %s", status, out)
	}
	for _, secret := range []string{adminPassword, strings.TrimSpace(string(key)), "wal.db"} {
		if strings.Contains(out, secret) {
			t.Errorf("the tool saw %q:\n%s", secret, out)
		}
	}
	if !strings.Contains(c.logs.String(), "run sandboxed") {
		t.Errorf("no start-up line saying tools run sandboxed:\n%s", c.logs.String())
	}
}

// TestToolsSandboxNone: tools.sandbox "none" runs tools unsandboxed,
// with a warning at start.
func TestToolsSandboxNone(t *testing.T) {
	// Its own data dir and ports: independent of the others, mostly waiting on its process.
	t.Parallel()
	c := startChild(t, writeConfig(t, t.TempDir(), toolsConfig(map[string]any{"sandbox": "none"})))
	if out, status := invokeProbe(t, c, "echo ran"); status != 200 || !strings.Contains(out, "ran") {
		t.Errorf("invoke = %d %s", status, out)
	}
	if !strings.Contains(c.logs.String(), `tools.sandbox is \"none\"`) {
		t.Errorf("no warning at start:\n%s", c.logs.String())
	}
}

// TestToolsRefusedWithoutBwrap: with bwrap not found and no opt-out the
// server starts, says at start that tools will refuse to run, and a tool
// does not run.
func TestToolsRefusedWithoutBwrap(t *testing.T) {
	// Its own data dir and ports: independent of the others, mostly waiting on its process.
	t.Parallel()
	env := []string{"PATH=" + t.TempDir(), "HOME=" + os.Getenv("HOME"), // no bwrap in PATH
		"GATEHOUSE_ADMIN_EMAIL=" + adminEmail, "GATEHOUSE_ADMIN_PASSWORD=" + adminPassword}
	dir := t.TempDir()
	c := startServe(t, "", env, "serve", "--config", writeConfig(t, dir, toolsConfig(nil)))
	out, status := invokeProbe(t, c, "touch ran")
	if status == 200 || !strings.Contains(out, "no sandbox") || !strings.Contains(out, "set tools.sandbox to") {
		t.Errorf("invoke = %d %s, want a refusal saying how to opt out", status, out)
	}
	if matches, _ := filepath.Glob(filepath.Join(dir, "workspaces", "*", "ran")); len(matches) > 0 {
		t.Errorf("the tool ran: %v", matches)
	}
	if !strings.Contains(c.logs.String(), "will refuse to run") {
		t.Errorf("no error at start:\n%s", c.logs.String())
	}
}

// toolsConfig is a config with tools allowed and a gateway token.
func toolsConfig(tools map[string]any) map[string]any {
	t := map[string]any{"exec_enabled": true}
	for k, v := range tools {
		t[k] = v
	}
	return map[string]any{
		"gateway": map[string]any{"host": "127.0.0.1", "port": 0, "token": "gw-admin"},
		"tools":   t,
	}
}

// invokeProbe registers a custom tool running script (sh -c) for agent
// a1 and invokes it; it returns the response (the output, or the error)
// and the status.
func invokeProbe(t *testing.T, c *child, script string) (string, int) {
	t.Helper()
	admin := map[string]string{"Authorization": "Bearer gw-admin", "X-Gateway-User-Id": "alice"}
	gc := newClient(c.gateway)
	for _, s := range []struct {
		path string
		body any
	}{
		{"/v1/providers", map[string]any{"name": "echo", "provider_type": "echo", "api_key": "sk-echo-unused-1234"}},
		{"/v1/agents", map[string]any{"agent_key": "a1", "provider": "echo", "model": "m"}},
		{"/v1/tools/custom", map[string]any{"name": "probe", "command": []string{"sh", "-c", script}, "agent_id": "a1"}},
	} {
		if code, err := gc.do("POST", s.path, s.body, admin, nil); code != 201 || err != nil {
			t.Fatalf("POST %s = %d, %v", s.path, code, err)
		}
	}
	var resp any
	code, err := gc.do("POST", "/v1/tools/invoke", map[string]any{"tool": "probe", "args": map[string]any{}, "agentId": "a1"}, admin, &resp)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(resp)
	return strings.ReplaceAll(string(b), `\n`, "\n"), code
}
