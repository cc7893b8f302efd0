package main

import (
	"errors"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// runBinary runs the built binary with args and env and returns its exit
// code and its output.
func runBinary(t *testing.T, env []string, args ...string) (int, string) {
	t.Helper()
	bin, err := buildBinary()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	code := 0
	if ee, ok := errors.AsType[*exec.ExitError](err); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return code, string(out)
}

// TestCLI: help exits 0 and names the subcommands and the admin
// variables; version prints the Go version; a second server on the same
// data dir names the one holding it.
func TestCLI(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {"help"}, {"serve", "--help"}} {
		code, out := runBinary(t, nil, args...)
		if code != 0 || strings.Contains(out, "flag: help requested") || !strings.Contains(out, "reset-password") || !strings.Contains(out, "GATEHOUSE_ADMIN_PASSWORD") {
			t.Errorf("%v = %d:\n%s", args, code, out)
		}
	}
	if code, out := runBinary(t, nil, "version"); code != 0 || !strings.Contains(out, "gatehouse ") || !strings.Contains(out, "go1.") {
		t.Errorf("version = %d %q", code, out)
	}
	if code, _ := runBinary(t, nil, "frobnicate"); code == 0 {
		t.Error("an unknown subcommand exited 0")
	}
	dir := t.TempDir()
	cfg := writeConfig(t, dir, nil)
	c := startChild(t, cfg)
	code, out := runBinary(t, nil, "serve", "--config", cfg)
	if code == 0 || !strings.Contains(out, "in use by another gatehouse (pid "+strconv.Itoa(c.cmd.Process.Pid)+")") {
		t.Errorf("second server = %d:\n%s", code, out)
	}
	c.stop(t)
}

// TestResetPassword: with the server stopped, reset-password sets the
// admin's password; a lost one is recoverable.
func TestResetPassword(t *testing.T) {
	dir := t.TempDir()
	cfg := writeConfig(t, dir, nil)
	startChild(t, cfg).stop(t)
	env := []string{"GATEHOUSE_ADMIN_EMAIL=" + adminEmail, "GATEHOUSE_ADMIN_PASSWORD=a-brand-new-password"}
	if code, out := runBinary(t, env, "reset-password", "--config", cfg); code != 0 || !strings.Contains(out, "set from GATEHOUSE_ADMIN_PASSWORD") {
		t.Fatalf("reset-password = %d:\n%s", code, out)
	}
	code, out := runBinary(t, []string{"GATEHOUSE_ADMIN_EMAIL=" + adminEmail}, "reset-password", "--config", cfg)
	if code != 0 || !strings.Contains(out, "(shown once): ") {
		t.Fatalf("generated reset = %d:\n%s", code, out)
	}
	generated := strings.TrimSpace(out[strings.LastIndex(out, "(shown once): ")+len("(shown once): "):])
	c := startChild(t, cfg)
	newClient(c.api).login(t, adminEmail, generated)
	c.stop(t)
}

// TestBootstrapAfterBind: a port clash stops the start before the
// bootstrap admin exists, so its one-time password is not used up.
func TestBootstrapAfterBind(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	dir := t.TempDir()
	port := busy.Addr().(*net.TCPAddr).Port
	cfg := writeConfig(t, dir, map[string]any{"server": map[string]any{"host": "127.0.0.1", "port": port}})
	code, out := runBinary(t, []string{"GATEHOUSE_ADMIN_EMAIL=first@example.com"}, "serve", "--config", cfg)
	if code == 0 || !strings.Contains(out, "address already in use") || strings.Contains(out, "shown once") {
		t.Fatalf("start on a busy port = %d:\n%s", code, out)
	}
	c := startChild(t, writeConfig(t, dir, nil))
	defer c.stop(t)
	// The admin is created after every listener bound, so its log line
	// may follow the first "listening".
	if !eventually(10*time.Second, func() bool { return strings.Contains(c.logs.String(), "created bootstrap admin") }) {
		t.Fatalf("the admin was created by the failed start:\n%s", c.logs.String())
	}
}
