// Package toolexectest gives tests the sandboxes tools run in: bwrap
// where it works (skipped where it does not, failed under CI=true, where
// `make test-deps` installs bubblewrap), or none.
package toolexectest

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"gatehouse/actors/gateway/toolexec"
)

// Bwrap returns a bwrap sandbox with cfg's ReadOnly and Hide (its Mode is
// ignored). When bwrap cannot run here the test is skipped, or fails
// under CI=true.
func Bwrap(tb testing.TB, cfg toolexec.SandboxConfig) *toolexec.Sandbox {
	tb.Helper()
	cfg.Mode = toolexec.SandboxBwrap
	sb, err := toolexec.NewSandbox(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	if err := sb.Check(); err != nil {
		if !errors.Is(err, toolexec.ErrNoSandbox) || os.Getenv("CI") == "true" {
			tb.Fatalf("bwrap cannot run (`make test-deps` installs bubblewrap): %v", err)
		}
		tb.Skipf("bwrap cannot run here: %v", err)
	}
	return sb
}

// None returns the unsandboxed mode.
func None(tb testing.TB) *toolexec.Sandbox {
	tb.Helper()
	sb, err := toolexec.NewSandbox(toolexec.SandboxConfig{Mode: toolexec.SandboxNone})
	if err != nil {
		tb.Fatal(err)
	}
	return sb
}

// Marker is a unique `sleep` duration (about 1000 s, with random
// decimals) that finds a tool's child among the host's processes.
func Marker() string { return fmt.Sprintf("1000.%09d", rand.N(1_000_000_000)) }

// NoneLeft fails tb if, 3 s from now, a process still runs `sleep
// marker` (and kills it).
func NoneLeft(tb testing.TB, marker string) {
	tb.Helper()
	deadline := time.Now().Add(3 * time.Second)
	for {
		pids := sleepers(marker)
		if len(pids) == 0 {
			return
		}
		if time.Now().After(deadline) {
			for _, pid := range pids {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
			tb.Fatalf("`sleep %s` (pids %v) outlived the tool", marker, pids)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// sleepers are the host pids running `sleep marker`.
func sleepers(marker string) []int {
	paths, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	want := []byte("\x00" + marker + "\x00")
	var pids []int
	for _, p := range paths {
		b, err := os.ReadFile(p)
		argv0, _, _ := bytes.Cut(b, []byte{0})
		if err != nil || !bytes.Contains(b, want) || filepath.Base(string(argv0)) != "sleep" {
			continue
		}
		if pid, err := strconv.Atoi(filepath.Base(filepath.Dir(p))); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}
