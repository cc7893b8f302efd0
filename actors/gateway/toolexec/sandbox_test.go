package toolexec_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gatehouse/actors/gateway/toolexec"
	"gatehouse/actors/gateway/toolexec/toolexectest"
)

// The server's secrets, in the environment it was started with.
const (
	adminPassword = "admin-password-secret-9f2"
	masterKey     = "6d61737465722d6b65792d7365637265742d6e6f742d666f722d746f6f6c7321"
)

// helperEnv makes the test binary a stand-in for the server: it runs the
// tools its JSON value lists (serverRun) and prints their outputs.
const helperEnv = "GATEHOUSE_TOOLEXEC_TEST_SERVER"

type serverRun struct {
	Mode      string     `json:"mode"`
	DataDir   string     `json:"data_dir"`
	Workspace string     `json:"workspace"`
	Tools     [][]string `json:"tools"`
}

func TestMain(m *testing.M) {
	if v := os.Getenv(helperEnv); v != "" {
		os.Exit(actAsServer(v))
	}
	os.Exit(m.Run())
}

// actAsServer runs the tools in req as the server would, with the data
// dir hidden, and prints their outputs as a JSON array.
func actAsServer(req string) int {
	var r serverRun
	if err := json.Unmarshal([]byte(req), &r); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	sb, err := toolexec.NewSandbox(toolexec.SandboxConfig{Mode: r.Mode, Hide: []string{r.DataDir}})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	outs := make([]string, 0, len(r.Tools))
	for _, argv := range r.Tools {
		out, err := toolexec.Run(context.Background(), toolexec.Spec{Argv: argv, Workspace: r.Workspace, Sandbox: sb, Timeout: 10 * time.Second}, nil)
		outs = append(outs, fmt.Sprintf("%s\n[err: %v]", out, err))
	}
	_ = json.NewEncoder(os.Stdout).Encode(outs)
	return 0
}

// TestSandboxHidesTheServer: a tool sees none of the server's secrets or
// files: not its environment (through /proc/1, /proc/$PPID or any pid),
// not the data dir around its workspace, not the master key. The server
// is this test binary, re-executed with secrets in its environment as
// the real one is started.
func TestSandboxHidesTheServer(t *testing.T) {
	toolexectest.Bwrap(t, toolexec.SandboxConfig{}) // skips (or fails under CI) without bwrap
	dataDir := filepath.Join(t.TempDir(), "data")
	ws := filepath.Join(dataDir, "workspaces", "a1")
	if err := os.MkdirAll(ws, 0o700); err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string]string{"master.key": masterKey, "wal.db": "wal", "config.json": `{"gateway":{"token":"x"}}`} {
		if err := os.WriteFile(filepath.Join(dataDir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	files := []string{"master.key", "wal.db", "config.json"}
	probes := []struct {
		name   string
		argv   []string
		hidden []string // besides the secrets
	}{
		{"pid 1's environ", []string{"cat", "/proc/1/environ"}, nil},
		{"the parent's environ", []string{"sh", "-c", "cat /proc/$PPID/environ"}, nil},
		{"every environ", []string{"sh", "-c", "cat /proc/[0-9]*/environ"}, nil},
		{"every command line", []string{"sh", "-c", "cat /proc/[0-9]*/cmdline"}, nil},
		{"the data dir", []string{"ls", "-la", "../.."}, files},
		{"the data dir, absolute", []string{"ls", "-la", dataDir}, files},
		{"the master key, relative", []string{"cat", "../../master.key"}, nil},
		{"the master key, absolute", []string{"cat", filepath.Join(dataDir, "master.key")}, nil},
		{"the host's /etc", []string{"ls", "/etc"}, []string{"shadow"}},
	}
	req := serverRun{Mode: toolexec.SandboxBwrap, DataDir: dataDir, Workspace: ws}
	for _, p := range probes {
		req.Tools = append(req.Tools, p.argv)
	}
	outs := runServer(t, req)
	if len(outs) != len(probes) {
		t.Fatalf("%d outputs for %d probes: %q", len(outs), len(probes), outs)
	}
	for i, p := range probes {
		for _, secret := range append([]string{adminPassword, masterKey, helperEnv}, p.hidden...) {
			if strings.Contains(outs[i], secret) {
				t.Errorf("%s: the tool saw %q:\n%s", p.name, secret, outs[i])
			}
		}
	}
}

// runServer runs the server stand-in with the secrets in its environment.
func runServer(t *testing.T, req serverRun) []string {
	t.Helper()
	b, _ := json.Marshal(req)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"="+string(b),
		"GATEHOUSE_ADMIN_PASSWORD="+adminPassword, "GATEHOUSE_MASTER_KEY="+masterKey)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("server stand-in: %v", err)
	}
	var outs []string
	if err := json.Unmarshal(out, &outs); err != nil {
		t.Fatalf("server stand-in printed %q: %v", out, err)
	}
	return outs
}

// TestSandboxNoneLeaks pins what tools.sandbox "none" gives up (and what
// every tool saw before the sandbox): the server's environment.
func TestSandboxNoneLeaks(t *testing.T) {
	dataDir := t.TempDir()
	ws := filepath.Join(dataDir, "workspaces", "a1")
	outs := runServer(t, serverRun{Mode: toolexec.SandboxNone, DataDir: dataDir, Workspace: ws,
		Tools: [][]string{{"sh", "-c", "cat /proc/$PPID/environ"}}})
	if !strings.Contains(outs[0], adminPassword) {
		t.Errorf("unsandboxed, the tool did not see the server's environment: %q", outs[0])
	}
}

// TestSetsidChildDies: a child that leaves the tool's process group and
// session (setsid) still dies at the timeout, and with a tool that exits
// on its own: the sandbox's PID namespace ends with it.
func TestSetsidChildDies(t *testing.T) {
	sb := toolexectest.Bwrap(t, toolexec.SandboxConfig{})
	tests := []struct {
		name    string
		script  string
		timeout bool
	}{
		{"at the timeout", "setsid sleep %s & sleep 30", true},
		{"after a clean exit", "setsid sleep %s & sleep 0.2; echo done", false},
		{"double fork, detached", "(setsid sh -c 'sleep %s' </dev/null >/dev/null 2>&1 &) ; sleep 30", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			marker := toolexectest.Marker()
			_, err := toolexec.Run(context.Background(), toolexec.Spec{Workspace: t.TempDir(), Sandbox: sb, Timeout: time.Second,
				Argv: []string{"sh", "-c", fmt.Sprintf(tt.script, marker)}}, json.RawMessage(`{}`))
			var ee *toolexec.ExitError
			if tt.timeout != (errors.As(err, &ee) && ee.TimedOut) || !tt.timeout && err != nil {
				t.Fatalf("err = %v, want a timeout: %v", err, tt.timeout)
			}
			toolexectest.NoneLeft(t, marker)
		})
	}
}

// TestNoSandboxRefuses: without a working bwrap, and no opt-out, a tool
// does not run, and says why.
func TestNoSandboxRefuses(t *testing.T) {
	broken := filepath.Join(t.TempDir(), "bwrap")
	if err := os.WriteFile(broken, []byte("#!/bin/sh\necho 'bwrap: setting up uid map: Permission denied' >&2\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, bwrap, want string
	}{
		{"missing", filepath.Join(t.TempDir(), "no-bwrap-here"), "does not run here"},
		{"not working", broken, "Permission denied"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sb, err := toolexec.NewSandbox(toolexec.SandboxConfig{Mode: toolexec.SandboxBwrap, Bwrap: tt.bwrap})
			if err != nil {
				t.Fatal(err)
			}
			if err := sb.Check(); !errors.Is(err, toolexec.ErrNoSandbox) || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), `"none"`) {
				t.Errorf("Check() = %v, want ErrNoSandbox saying %q and how to opt out", err, tt.want)
			}
			ws := t.TempDir()
			_, err = toolexec.Run(context.Background(), toolexec.Spec{Workspace: ws, Sandbox: sb, Argv: []string{"touch", "ran"}}, nil)
			if !errors.Is(err, toolexec.ErrNoSandbox) {
				t.Errorf("Run = %v, want ErrNoSandbox", err)
			}
			if _, err := os.Stat(filepath.Join(ws, "ran")); err == nil {
				t.Error("the tool ran without its sandbox")
			}
		})
	}
	t.Run("not in PATH", func(t *testing.T) {
		t.Setenv("PATH", t.TempDir())
		sb, _ := toolexec.NewSandbox(toolexec.DefaultSandboxConfig())
		if err := sb.Check(); !errors.Is(err, toolexec.ErrNoSandbox) || !strings.Contains(err.Error(), "not found") {
			t.Errorf("Check() = %v, want ErrNoSandbox: not found", err)
		}
	})
}

// TestSandboxConfigValidate names the bad field.
func TestSandboxConfigValidate(t *testing.T) {
	for _, tt := range []struct {
		cfg  toolexec.SandboxConfig
		want string
	}{
		{toolexec.SandboxConfig{Mode: "docker"}, "Mode"},
		{toolexec.SandboxConfig{ReadOnly: []string{"rel/path"}}, "ReadOnly"},
		{toolexec.SandboxConfig{Hide: []string{"data"}}, "Hide"},
	} {
		if err := tt.cfg.Validate(); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Validate(%+v) = %v, want it to name %s", tt.cfg, err, tt.want)
		}
	}
	if err := toolexec.DefaultSandboxConfig().Validate(); err != nil {
		t.Errorf("DefaultSandboxConfig().Validate() = %v", err)
	}
}

// TestSandboxReadOnly: a declared path is seen, read-only; a hidden path
// under a shown one is empty.
func TestSandboxReadOnly(t *testing.T) {
	shared := t.TempDir()
	if err := os.WriteFile(filepath.Join(shared, "lib.txt"), []byte("library"), 0o644); err != nil {
		t.Fatal(err)
	}
	secret := filepath.Join(shared, "private")
	if err := os.MkdirAll(secret, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(secret, "key"), []byte("hidden-key"), 0o600); err != nil {
		t.Fatal(err)
	}
	sb := toolexectest.Bwrap(t, toolexec.SandboxConfig{ReadOnly: []string{shared}, Hide: []string{secret}})
	out, err := toolexec.Run(context.Background(), toolexec.Spec{Workspace: t.TempDir(), Sandbox: sb,
		Argv: []string{"sh", "-c", fmt.Sprintf("cat %s/lib.txt; echo; cat %s/key; touch %s/new && echo wrote", shared, secret, shared)}}, nil)
	if ee, ok := errors.AsType[*toolexec.ExitError](err); !ok || ee.Code != 1 {
		t.Fatalf("err = %v (%s), want exit 1 (touch failed)", err, out)
	}
	if !strings.Contains(out, "library") || strings.Contains(out, "hidden-key") || strings.Contains(out, "wrote") {
		t.Errorf("output %q: want the declared file, not the hidden one, and no write", out)
	}
}

// TestSandboxDataDirUnderShownPath: a data dir under a shown directory
// (/usr/local/var/gatehouse, say) is covered, and the workspace inside it
// is still there, writable.
func TestSandboxDataDirUnderShownPath(t *testing.T) {
	shown := t.TempDir()
	dataDir := filepath.Join(shown, "data")
	ws := filepath.Join(dataDir, "workspaces", "a1")
	if err := os.MkdirAll(ws, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dataDir, "master.key"), []byte(masterKey), 0o600); err != nil {
		t.Fatal(err)
	}
	sb := toolexectest.Bwrap(t, toolexec.SandboxConfig{ReadOnly: []string{shown}, Hide: []string{dataDir}})
	out, err := toolexec.Run(context.Background(), toolexec.Spec{Workspace: ws, Sandbox: sb,
		Argv: []string{"sh", "-c", "ls -a ../..; cat ../../master.key; echo w > f && cat f"}}, nil)
	if err != nil {
		t.Fatalf("err = %v (%s)", err, out)
	}
	if strings.Contains(out, masterKey) || strings.Contains(out, "master.key\n") || !strings.HasSuffix(strings.TrimSpace(out), "w") {
		t.Errorf("output %q: want the data dir covered and the workspace writable", out)
	}
}
