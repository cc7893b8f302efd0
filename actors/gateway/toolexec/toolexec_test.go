package toolexec

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestRun(t *testing.T) {
	ws := t.TempDir()
	t.Setenv("GATEHOUSE_MASTER_KEY", "00ff-server-secret")
	t.Setenv("GATEHOUSE_GATEWAY_TOKEN", "server-token-secret")
	tests := []struct {
		name     string
		spec     Spec
		args     string
		want     string // substring of the output
		wantCode int    // -2: success
		timeout  bool
	}{
		{"args on stdin", Spec{Argv: []string{"cat"}}, `{"a":1}`, `{"a":1}`, -2, false},
		{"no shell", Spec{Argv: []string{"echo", "$HOME", "&&", "id"}}, `{}`, "$HOME && id", -2, false},
		{"only its own env", Spec{Argv: []string{"env"}, Env: map[string]string{"TOOL_TOKEN": "t1"}}, `{}`, "TOOL_TOKEN=t1", -2, false},
		{"working dir inside", Spec{Argv: []string{"pwd"}, Dir: "sub/dir"}, `{}`, filepath.Join(ws, "sub/dir"), -2, false},
		{"non-zero exit", Spec{Argv: []string{"sh", "-c", "echo partial; exit 3"}}, `{}`, "partial", 3, false},
		{"timeout kills the group", Spec{Argv: []string{"sh", "-c", "sleep 30 & sleep 30; echo never"}, Timeout: 300 * time.Millisecond}, `{}`, "", -1, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.spec.Workspace = ws
			start := time.Now()
			out, err := Run(context.Background(), tt.spec, json.RawMessage(tt.args))
			if took := time.Since(start); took > 5*time.Second {
				t.Errorf("took %v", took)
			}
			if !strings.Contains(out, tt.want) {
				t.Errorf("output %q lacks %q", out, tt.want)
			}
			var ee *ExitError
			switch {
			case tt.wantCode == -2 && err != nil:
				t.Errorf("err = %v", err)
			case tt.wantCode != -2 && (!errors.As(err, &ee) || ee.Code != tt.wantCode || ee.TimedOut != tt.timeout):
				t.Errorf("err = %#v, want exit %d (timeout %v)", err, tt.wantCode, tt.timeout)
			}
			if strings.Contains(out, "server-secret") || strings.Contains(out, "server-token") {
				t.Errorf("the server's environment reached the tool: %q", out)
			}
		})
	}
}

// TestTimeoutKillsChildren: a tool's background children die with it.
func TestTimeoutKillsChildren(t *testing.T) {
	ws := t.TempDir()
	pidFile := filepath.Join(ws, "child.pid")
	_, err := Run(context.Background(), Spec{Workspace: ws, Timeout: 300 * time.Millisecond,
		Argv: []string{"sh", "-c", "sleep 60 & echo $! > child.pid; wait"}}, json.RawMessage(`{}`))
	var ee *ExitError
	if !errors.As(err, &ee) || !ee.TimedOut {
		t.Fatalf("err = %v, want a timeout", err)
	}
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(3 * time.Second)
	for syscall.Kill(pid, 0) == nil {
		if time.Now().After(deadline) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("child %d outlived the tool's timeout", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestOutputCap: 10 MB of output is cut at MaxOutput, and the tool is not
// blocked by the cap.
func TestOutputCap(t *testing.T) {
	out, err := Run(context.Background(), Spec{Workspace: t.TempDir(), Timeout: 20 * time.Second,
		Argv: []string{"head", "-c", "10000000", "/dev/zero"}}, json.RawMessage(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	if len(out) > MaxOutput+200 || !strings.Contains(out, "bytes of output dropped") {
		t.Errorf("output of %d bytes, want capped at %d", len(out), MaxOutput)
	}
}

func TestRefused(t *testing.T) {
	ws := t.TempDir()
	for _, spec := range []Spec{
		{Workspace: ws},
		{Workspace: ws, Argv: []string{"cat"}, Dir: "../escape"},
		{Workspace: ws, Argv: []string{"cat"}, Dir: "/etc"},
		{Workspace: ws, Argv: []string{"no-such-command-here"}},
	} {
		if _, err := Run(context.Background(), spec, nil); !errors.Is(err, ErrSpec) {
			t.Errorf("Run(%+v) = %v, want ErrSpec", spec, err)
		}
	}
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no sh")
	}
}

// TestEnvironAbsolute: a relative workspace (a relative data dir) gives
// absolute HOME and TMPDIR, since the tool runs inside the workspace.
func TestEnvironAbsolute(t *testing.T) {
	t.Chdir(t.TempDir())
	for _, kv := range Environ(nil, "data/workspaces/a") {
		if k, v, _ := strings.Cut(kv, "="); (k == "HOME" || k == "TMPDIR") && !filepath.IsAbs(v) {
			t.Errorf("%s = %q, want an absolute path", k, v)
		}
	}
}
