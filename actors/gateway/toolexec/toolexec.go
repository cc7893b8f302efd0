// Package toolexec runs a custom tool's command on the host under the
// gateway's exec rules: inside a Sandbox (bubblewrap: the tool sees its
// workspace, the system directories read-only, a private /proc and PID
// namespace, an empty /tmp; never the data dir or the server's
// processes), no shell (the argv as given), the tool's JSON arguments on
// stdin, a working directory inside the agent's workspace, an environment
// made of the tool's own variables and a minimal PATH only (never the
// server's: no gateway token, master key or provider keys can leak to a
// tool), everything it started killed at the timeout (the sandbox's PID
// namespace ends with it), and its output capped. A non-zero exit is the
// tool's failure (*ExitError, with the output), not the gateway's.
//
//	sb, err := toolexec.NewSandbox(toolexec.DefaultSandboxConfig())
//	if err := sb.Check(); err != nil { … } // bwrap missing: tools refuse to run
//	out, err := toolexec.Run(ctx, toolexec.Spec{Argv: []string{"wc", "-w"},
//		Workspace: ws, Sandbox: sb, Timeout: 10 * time.Second}, args)
//
// Run and Sandbox are safe for concurrent use.
package toolexec

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// MaxOutput is how much of a tool's stdout and stderr (together) is
// kept; the rest is read and dropped, so the tool is not blocked.
const MaxOutput = 1 << 20

// DefaultPath is the only PATH a tool gets.
const DefaultPath = "/usr/local/bin:/usr/bin:/bin"

// Spec is one execution.
type Spec struct {
	// Argv is the command and its arguments; Argv[0] is looked up in
	// DefaultPath unless it contains a slash.
	Argv []string
	// Workspace is the agent's workspace (created if missing); Dir, if
	// set, is a directory inside it (relative), where the command runs.
	Workspace, Dir string
	// Env is the tool's own environment (NAME=value pairs are built from
	// it); PATH, HOME and TMPDIR are set by Run unless Env sets them.
	Env map[string]string
	// Timeout kills the process group after this long.
	Timeout time.Duration
	// Sandbox is where the command runs; nil refuses to run it
	// (ErrNoSandbox).
	Sandbox *Sandbox
}

// ExitError is a tool that ran and failed: a non-zero exit, a signal, or
// the timeout.
type ExitError struct {
	Code     int  // the exit code; -1 when killed
	TimedOut bool // killed at the timeout
	Output   string
}

func (e *ExitError) Error() string {
	if e.TimedOut {
		return "timed out and was killed"
	}
	return fmt.Sprintf("exit status %d", e.Code)
}

// ErrSpec is a Spec that cannot run (no command, a directory outside the
// workspace, a command not found).
var ErrSpec = errors.New("toolexec: invalid tool")

// Run runs spec with args (a JSON value) on stdin and returns its output
// (stdout then stderr, capped at MaxOutput) on a zero exit. ctx cancels
// the run like the timeout does.
func Run(ctx context.Context, spec Spec, args json.RawMessage) (string, error) {
	if len(spec.Argv) == 0 || spec.Argv[0] == "" {
		return "", fmt.Errorf("%w: empty command", ErrSpec)
	}
	ws, err := filepath.Abs(spec.Workspace)
	if err != nil || spec.Workspace == "" {
		return "", fmt.Errorf("%w: no workspace", ErrSpec)
	}
	dir, err := workDir(ws, spec.Dir)
	if err != nil {
		return "", err
	}
	bin, err := LookPath(spec.Argv[0])
	if err != nil {
		return "", err
	}
	if spec.Sandbox == nil {
		return "", fmt.Errorf("%w: none configured", ErrNoSandbox)
	}
	path, argv, err := spec.Sandbox.Wrap(bin, spec.Argv[1:], ws, dir)
	if err != nil {
		return "", err
	}
	if spec.Timeout <= 0 {
		spec.Timeout = 60 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, spec.Timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, argv...)
	cmd.Dir = dir
	cmd.Env = Environ(spec.Env, ws)
	cmd.Stdin = bytes.NewReader(args)
	out := &capped{max: MaxOutput}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// The whole group: a shell script's children die with it; under bwrap
	// the group is bwrap, whose death ends the PID namespace, and so
	// every process in it, setsid or not.
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = time.Second // a grandchild holding the pipes open
	err = cmd.Run()
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // leftovers of a tool that exited
	}
	text := out.String()
	if err == nil {
		return text, nil
	}
	ee := &ExitError{Code: -1, Output: text}
	var xe *exec.ExitError
	if errors.As(err, &xe) {
		ee.Code = xe.ExitCode()
	}
	if ctx.Err() != nil {
		ee.TimedOut = errors.Is(ctx.Err(), context.DeadlineExceeded)
		if !ee.TimedOut {
			return text, ctx.Err()
		}
	}
	return text, ee
}

// workDir is dir inside workspace (created), refusing any escape.
func workDir(workspace, dir string) (string, error) {
	if workspace == "" {
		return "", fmt.Errorf("%w: no workspace", ErrSpec)
	}
	if err := os.MkdirAll(workspace, 0o700); err != nil {
		return "", fmt.Errorf("toolexec: workspace: %w", err)
	}
	if dir == "" {
		return workspace, nil
	}
	if filepath.IsAbs(dir) || !filepath.IsLocal(dir) {
		return "", fmt.Errorf("%w: working_dir %q must be a relative path inside the workspace", ErrSpec, dir)
	}
	full := filepath.Join(workspace, dir)
	if err := os.MkdirAll(full, 0o700); err != nil {
		return "", fmt.Errorf("toolexec: working_dir: %w", err)
	}
	return full, nil
}

// LookPath finds a command in DefaultPath only (a name with a slash is
// taken as it is).
func LookPath(name string) (string, error) {
	if strings.Contains(name, "/") {
		return name, nil
	}
	for _, d := range filepath.SplitList(DefaultPath) {
		p := filepath.Join(d, name)
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%w: command %q not found in %s", ErrSpec, name, DefaultPath)
}

// Environ is a tool's whole environment: env, and PATH (DefaultPath),
// HOME and TMPDIR (the workspace, made absolute: the tool runs inside it,
// where a relative path would name a directory below it), LANG unless env
// sets them.
func Environ(env map[string]string, workspace string) []string {
	if abs, err := filepath.Abs(workspace); err == nil {
		workspace = abs
	}
	base := map[string]string{"PATH": DefaultPath, "HOME": workspace, "TMPDIR": workspace, "LANG": "C.UTF-8"}
	for k, v := range env {
		base[k] = v
	}
	out := make([]string, 0, len(base))
	for k, v := range base {
		out = append(out, k+"="+v)
	}
	return out
}

// capped keeps the first max bytes written and drops the rest.
type capped struct {
	buf     bytes.Buffer
	max     int
	dropped int64
}

func (c *capped) Write(p []byte) (int, error) {
	if room := c.max - c.buf.Len(); room > 0 {
		c.buf.Write(p[:min(room, len(p))])
		c.dropped += int64(len(p) - min(room, len(p)))
	} else {
		c.dropped += int64(len(p))
	}
	return len(p), nil
}

func (c *capped) String() string {
	if c.dropped > 0 {
		return c.buf.String() + fmt.Sprintf("\n[%d bytes of output dropped: the cap is %d]", c.dropped, c.max)
	}
	return c.buf.String()
}
