package toolexec_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gatehouse/actors/gateway/toolexec"
	"gatehouse/actors/gateway/toolexec/toolexectest"
)

// sandboxes are the modes the exec rules hold in: bwrap (skipped where
// it cannot run, failed under CI=true) and none.
func sandboxes(t *testing.T) map[string]func(*testing.T) *toolexec.Sandbox {
	t.Helper()
	return map[string]func(*testing.T) *toolexec.Sandbox{
		"bwrap": func(t *testing.T) *toolexec.Sandbox {
			t.Helper()
			return toolexectest.Bwrap(t, toolexec.SandboxConfig{})
		},
		"none": func(t *testing.T) *toolexec.Sandbox { t.Helper(); return toolexectest.None(t) },
	}
}

func TestRun(t *testing.T) {
	t.Setenv("GATEHOUSE_MASTER_KEY", "00ff-server-secret")
	t.Setenv("GATEHOUSE_GATEWAY_TOKEN", "server-token-secret")
	for mode, sandbox := range sandboxes(t) {
		t.Run(mode, func(t *testing.T) { testRun(t, sandbox(t)) })
	}
}

func testRun(t *testing.T, sb *toolexec.Sandbox) {
	ws := t.TempDir()
	tests := []struct {
		name     string
		spec     toolexec.Spec
		args     string
		want     string // substring of the output
		wantCode int    // -2: success
		timeout  bool
	}{
		{"args on stdin", toolexec.Spec{Argv: []string{"cat"}}, `{"a":1}`, `{"a":1}`, -2, false},
		{"no shell", toolexec.Spec{Argv: []string{"echo", "$HOME", "&&", "id"}}, `{}`, "$HOME && id", -2, false},
		{"only its own env", toolexec.Spec{Argv: []string{"env"}, Env: map[string]string{"TOOL_TOKEN": "t1"}}, `{}`, "TOOL_TOKEN=t1", -2, false},
		{"working dir inside", toolexec.Spec{Argv: []string{"pwd"}, Dir: "sub/dir"}, `{}`, filepath.Join(ws, "sub/dir"), -2, false},
		{"writes its workspace", toolexec.Spec{Argv: []string{"sh", "-c", "echo kept > out.txt && cat out.txt"}}, `{}`, "kept", -2, false},
		{"non-zero exit", toolexec.Spec{Argv: []string{"sh", "-c", "echo partial; exit 3"}}, `{}`, "partial", 3, false},
		{"timeout kills the group", toolexec.Spec{Argv: []string{"sh", "-c", "sleep 30 & sleep 30; echo never"}, Timeout: 300 * time.Millisecond}, `{}`, "", -1, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.spec.Workspace, tt.spec.Sandbox = ws, sb
			start := time.Now()
			out, err := toolexec.Run(context.Background(), tt.spec, json.RawMessage(tt.args))
			if took := time.Since(start); took > 5*time.Second {
				t.Errorf("took %v", took)
			}
			if !strings.Contains(out, tt.want) {
				t.Errorf("output %q lacks %q", out, tt.want)
			}
			var ee *toolexec.ExitError
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
	if b, err := os.ReadFile(filepath.Join(ws, "out.txt")); err != nil || string(b) != "kept\n" {
		t.Errorf("the tool's file in the workspace = %q, %v; want it kept", b, err)
	}
}

// TestTimeoutKillsChildren: a tool's background children die with it, in
// either mode.
func TestTimeoutKillsChildren(t *testing.T) {
	for mode, sandbox := range sandboxes(t) {
		t.Run(mode, func(t *testing.T) {
			marker := toolexectest.Marker()
			_, err := toolexec.Run(context.Background(), toolexec.Spec{Workspace: t.TempDir(), Sandbox: sandbox(t),
				Timeout: 300 * time.Millisecond, Argv: []string{"sh", "-c", "sleep " + marker + " & wait"}}, json.RawMessage(`{}`))
			var ee *toolexec.ExitError
			if !errors.As(err, &ee) || !ee.TimedOut {
				t.Fatalf("err = %v, want a timeout", err)
			}
			toolexectest.NoneLeft(t, marker)
		})
	}
}

// TestOutputCap: 10 MB of output is cut at MaxOutput, and the tool is not
// blocked by the cap.
func TestOutputCap(t *testing.T) {
	for mode, sandbox := range sandboxes(t) {
		t.Run(mode, func(t *testing.T) {
			out, err := toolexec.Run(context.Background(), toolexec.Spec{Workspace: t.TempDir(), Sandbox: sandbox(t), Timeout: 20 * time.Second,
				Argv: []string{"head", "-c", "10000000", "/dev/zero"}}, json.RawMessage(`{}`))
			if err != nil {
				t.Fatal(err)
			}
			if len(out) > toolexec.MaxOutput+200 || !strings.Contains(out, "bytes of output dropped") {
				t.Errorf("output of %d bytes, want capped at %d", len(out), toolexec.MaxOutput)
			}
		})
	}
}

func TestRefused(t *testing.T) {
	ws := t.TempDir()
	sb := toolexectest.None(t)
	for _, spec := range []toolexec.Spec{
		{Workspace: ws, Sandbox: sb},
		{Workspace: ws, Sandbox: sb, Argv: []string{"cat"}, Dir: "../escape"},
		{Workspace: ws, Sandbox: sb, Argv: []string{"cat"}, Dir: "/etc"},
		{Workspace: ws, Sandbox: sb, Argv: []string{"no-such-command-here"}},
	} {
		if _, err := toolexec.Run(context.Background(), spec, nil); !errors.Is(err, toolexec.ErrSpec) {
			t.Errorf("Run(%+v) = %v, want ErrSpec", spec, err)
		}
	}
	if _, err := toolexec.Run(context.Background(), toolexec.Spec{Workspace: ws, Argv: []string{"true"}}, nil); !errors.Is(err, toolexec.ErrNoSandbox) {
		t.Errorf("Run without a sandbox = %v, want ErrNoSandbox", err)
	}
}

// TestEnvironAbsolute: a relative workspace (a relative data dir) gives
// absolute HOME and TMPDIR, since the tool runs inside the workspace.
func TestEnvironAbsolute(t *testing.T) {
	t.Chdir(t.TempDir())
	for _, kv := range toolexec.Environ(nil, "data/workspaces/a") {
		if k, v, _ := strings.Cut(kv, "="); (k == "HOME" || k == "TMPDIR") && !filepath.IsAbs(v) {
			t.Errorf("%s = %q, want an absolute path", k, v)
		}
	}
}
