package toolexec

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

// Sandbox modes.
const (
	// SandboxBwrap runs every tool and stdio MCP server under bubblewrap
	// (the default).
	SandboxBwrap = "bwrap"
	// SandboxNone runs them as the server's user, seeing what it sees:
	// an operator's explicit choice, warned about at start.
	SandboxNone = "none"
)

// ErrNoSandbox is a tool refused because its sandbox cannot run (bwrap
// missing or not working) and the operator did not opt out.
var ErrNoSandbox = errors.New("toolexec: no sandbox")

// systemDirs are the host directories a sandboxed tool sees, read-only,
// when they exist: a symlink (merged /usr: /bin -> usr/bin) is recreated
// as the same symlink.
var systemDirs = []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"}

// systemEtc is the part of /etc a sandboxed tool sees, read-only: name
// resolution, users, TLS roots, the dynamic linker and Debian's
// alternatives (/usr/bin/awk -> /etc/alternatives/awk). Not the rest:
// /etc may hold the server's own config file, or /etc/shadow.
var systemEtc = []string{
	"/etc/alternatives", "/etc/ssl", "/etc/ca-certificates", "/etc/pki", "/etc/crypto-policies",
	"/etc/resolv.conf", "/etc/hosts", "/etc/host.conf", "/etc/nsswitch.conf", "/etc/gai.conf",
	"/etc/services", "/etc/protocols", "/etc/passwd", "/etc/group", "/etc/localtime",
	"/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/mime.types",
	"/etc/os-release", "/etc/debian_version", "/etc/timezone",
	"/run/systemd/resolve", // resolv.conf's target under systemd-resolved
}

// SandboxConfig configures the sandbox tools and stdio MCP servers run in.
type SandboxConfig struct {
	// Mode is SandboxBwrap ("" means it too) or SandboxNone.
	Mode string
	// Bwrap is the bwrap binary; "" looks "bwrap" up in the server's PATH.
	Bwrap string
	// ReadOnly are more host paths (absolute) a tool sees, read-only:
	// an interpreter or an MCP server's package outside /usr.
	ReadOnly []string
	// Hide are host paths (absolute) never shown, should they lie under
	// a shown directory: the data dir, the master key file, the config
	// file. A directory is covered by an empty tmpfs, a file by /dev/null.
	Hide []string
}

// DefaultSandboxConfig is bwrap, found in PATH.
func DefaultSandboxConfig() SandboxConfig { return SandboxConfig{Mode: SandboxBwrap} }

// Validate names the first bad field.
func (c SandboxConfig) Validate() error {
	if c.Mode != "" && c.Mode != SandboxBwrap && c.Mode != SandboxNone {
		return fmt.Errorf("toolexec: Mode must be %q or %q, not %q", SandboxBwrap, SandboxNone, c.Mode)
	}
	for _, p := range c.ReadOnly {
		if !filepath.IsAbs(p) {
			return fmt.Errorf("toolexec: ReadOnly: %q must be an absolute path", p)
		}
	}
	for _, p := range c.Hide {
		if !filepath.IsAbs(p) {
			return fmt.Errorf("toolexec: Hide: %q must be an absolute path", p)
		}
	}
	return nil
}

// Sandbox wraps tool commands in the configured sandbox. It is safe for
// concurrent use.
type Sandbox struct {
	cfg   SandboxConfig
	check func() error
}

// NewSandbox returns the sandbox cfg describes. It does not probe bwrap:
// Check does, once.
func NewSandbox(cfg SandboxConfig) (*Sandbox, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Mode == "" {
		cfg.Mode = SandboxBwrap
	}
	s := &Sandbox{cfg: cfg}
	s.check = sync.OnceValue(s.probe)
	return s, nil
}

// Mode is SandboxBwrap or SandboxNone.
func (s *Sandbox) Mode() string { return s.cfg.Mode }

// Check reports whether tools can run: nil for SandboxNone, or when bwrap
// ran a trial command; else ErrNoSandbox with the reason. The first call
// probes (up to 10 s); later calls return its answer.
func (s *Sandbox) Check() error { return s.check() }

func (s *Sandbox) probe() error {
	if s.cfg.Mode == SandboxNone {
		return nil
	}
	bin := s.cfg.Bwrap
	if bin == "" {
		p, err := exec.LookPath("bwrap")
		if err != nil {
			return fmt.Errorf(`%w: bwrap (Debian's bubblewrap) not found in PATH: install it, or set tools.sandbox to "none" to run tools unsandboxed`, ErrNoSandbox)
		}
		bin = p
	}
	s.cfg.Bwrap = bin // written once, before any Wrap: Wrap calls Check first
	dir, err := os.MkdirTemp("", "gatehouse-sandbox-probe-")
	if err != nil {
		return fmt.Errorf("%w: %v", ErrNoSandbox, err)
	}
	defer os.RemoveAll(dir)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	path, argv := s.bwrapArgv([]string{"true"}, dir, dir)
	cmd := exec.CommandContext(ctx, path, argv...)
	cmd.Env = []string{"PATH=" + DefaultPath}
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf(`%w: %s does not run here (%v: %s): allow it user namespaces, or set tools.sandbox to "none" to run tools unsandboxed`,
			ErrNoSandbox, bin, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// Wrap returns the program and arguments that run bin with args inside
// the sandbox, in dir (absolute, inside the absolute workspace). The
// caller sets the returned command's environment to exactly the tool's
// (Environ): bwrap passes it on, and holds nothing else itself. Wrap
// fails with ErrNoSandbox when the sandbox cannot run.
func (s *Sandbox) Wrap(bin string, args []string, workspace, dir string) (string, []string, error) {
	return s.WrapShared(bin, args, workspace, dir)
}

// WrapShared is Wrap with more directories (absolute, existing) shown
// read-write at their own paths: a cache several servers share (the
// stdio MCP servers' npm cache).
func (s *Sandbox) WrapShared(bin string, args []string, workspace, dir string, shared ...string) (string, []string, error) {
	if err := s.Check(); err != nil {
		return "", nil, err
	}
	if s.cfg.Mode == SandboxNone {
		return bin, args, nil
	}
	path, argv := s.bwrapArgv(append([]string{bin}, args...), workspace, dir, shared...)
	return path, argv, nil
}

// bwrapArgv is bwrap's command line for argv: new user (where allowed),
// PID, IPC, UTS and cgroup namespaces, no capabilities, its own session,
// killed with its parent; a private /proc, a minimal /dev, an empty /tmp;
// the system directories and ReadOnly read-only, Hide covered, and the
// workspace read-write at its own path. The network is the host's.
func (s *Sandbox) bwrapArgv(argv []string, workspace, dir string, shared ...string) (string, []string) {
	a := []string{
		"--unshare-user-try", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
		"--cap-drop", "ALL", "--die-with-parent", "--new-session",
		"--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp",
	}
	shown := []string{}
	for _, d := range systemDirs {
		fi, err := os.Lstat(d)
		switch {
		case err != nil:
		case fi.Mode()&os.ModeSymlink != 0:
			if target, err := os.Readlink(d); err == nil {
				a = append(a, "--symlink", target, d)
			}
		case fi.IsDir():
			a = append(a, "--ro-bind", d, d)
			shown = append(shown, d)
		}
	}
	for _, p := range append(slices.Clone(systemEtc), s.cfg.ReadOnly...) {
		a = append(a, "--ro-bind-try", p, p)
		shown = append(shown, p)
	}
	for _, h := range s.cfg.Hide {
		if !slices.ContainsFunc(shown, func(d string) bool { return within(h, d) }) {
			continue // not visible anyway
		}
		if fi, err := os.Stat(h); err == nil && !fi.IsDir() {
			a = append(a, "--ro-bind", "/dev/null", h)
		} else if err == nil {
			a = append(a, "--tmpfs", h)
		}
	}
	for _, d := range shared {
		a = append(a, "--bind", d, d)
	}
	a = append(a, "--bind", workspace, workspace, "--chdir", dir, "--")
	return s.cfg.Bwrap, append(a, argv...)
}

// within reports whether path is dir or below it.
func within(path, dir string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && filepath.IsLocal(rel)
}
