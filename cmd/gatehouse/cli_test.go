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

// runSplit is runBinary with stdout and stderr apart, in dir ("" for
// this one).
func runSplit(t *testing.T, dir string, env []string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	bin, err := buildBinary()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Dir, cmd.Env = dir, append(environWithout("GATEHOUSE_"), env...)
	var o, e strings.Builder
	cmd.Stdout, cmd.Stderr = &o, &e
	err = cmd.Run()
	if ee, ok := errors.AsType[*exec.ExitError](err); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return code, o.String(), e.String()
}

// TestCLI: help and the version go to stdout and exit 0: the overview of
// the subcommands on gatehouse --help, each subcommand's own description
// and flags on its -h; an unknown subcommand says so; a second server on
// the same data dir names the one holding it.
func TestCLI(t *testing.T) {
	// Its own data dir and ports: independent of the others, mostly waiting on its process.
	t.Parallel()
	tests := []struct {
		args          []string
		want, notWant []string
	}{
		{[]string{"--help"}, []string{"gatehouse serve [flags]", "reset-password", "GATEHOUSE_ADMIN_PASSWORD", "--version"}, nil},
		{[]string{"help"}, []string{"gatehouse serve [flags]", "reset-password"}, nil},
		{[]string{"serve", "--help"}, []string{"usage: gatehouse serve [flags]", "-gateway-port", "GATEHOUSE_GATEWAY_PORT", "-data-dir", "-demo-echo"},
			[]string{"reset-password", "flag: help requested"}},
		{[]string{"serve", "-h"}, []string{"usage: gatehouse serve [flags]", "-port"}, []string{"reset-password"}},
		{[]string{"reset-password", "--help"}, []string{"usage: gatehouse reset-password [flags]", "Sets a new password", "GATEHOUSE_ADMIN_PASSWORD", "server stopped", "-data-dir"},
			[]string{"gatehouse serve [flags]"}},
		{[]string{"version"}, []string{"gatehouse ", "go1."}, nil},
		{[]string{"--version"}, []string{"gatehouse ", "go1."}, nil},
	}
	for _, tt := range tests {
		code, stdout, stderr := runSplit(t, "", nil, tt.args...)
		if code != 0 || stderr != "" {
			t.Errorf("%v = %d, stderr %q", tt.args, code, stderr)
		}
		for _, w := range tt.want {
			if !strings.Contains(stdout, w) {
				t.Errorf("%v: stdout lacks %q:\n%s", tt.args, w, stdout)
			}
		}
		for _, w := range tt.notWant {
			if strings.Contains(stdout, w) {
				t.Errorf("%v: stdout has %q:\n%s", tt.args, w, stdout)
			}
		}
	}
	for _, args := range [][]string{{"frobnicate"}, {}} {
		code, stdout, stderr := runSplit(t, "", nil, args...)
		want := map[int]string{0: "no subcommand", 1: `unknown subcommand "frobnicate"`}[len(args)]
		if code == 0 || stdout != "" || !strings.Contains(stderr, want) || !strings.Contains(stderr, "gatehouse serve [flags]") {
			t.Errorf("%v = %d, stdout %q, stderr %q; want %q and the overview", args, code, stdout, stderr, want)
		}
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
// admin's password; a lost one is recoverable; the admin's access tokens
// end with it (issue 31).
func TestResetPassword(t *testing.T) {
	// Its own data dir and ports: independent of the others, mostly waiting on its process.
	t.Parallel()
	dir := t.TempDir()
	cfg := writeConfig(t, dir, nil)
	c := startChild(t, cfg)
	var tok struct{ Token string }
	expect(t, "create token", 201)(newClientLoggedIn(t, c.api, adminEmail, adminPassword).do("POST", "/api/tokens", map[string]any{"name": "ops", "scopes": []string{"admin"}}, nil, &tok))
	c.stop(t)
	env := []string{"GATEHOUSE_ADMIN_EMAIL=" + adminEmail, "GATEHOUSE_ADMIN_PASSWORD=a-brand-new-password"}
	if code, out := runBinary(t, env, "reset-password", "--config", cfg); code != 0 || !strings.Contains(out, "set from GATEHOUSE_ADMIN_PASSWORD") {
		t.Fatalf("reset-password = %d:\n%s", code, out)
	}
	code, out := runBinary(t, []string{"GATEHOUSE_ADMIN_EMAIL=" + adminEmail}, "reset-password", "--config", cfg)
	if code != 0 || !strings.Contains(out, "(shown once): ") {
		t.Fatalf("generated reset = %d:\n%s", code, out)
	}
	generated := strings.TrimSpace(out[strings.LastIndex(out, "(shown once): ")+len("(shown once): "):])
	c = startChild(t, cfg)
	newClient(c.api).login(t, adminEmail, generated)
	expect(t, "a token after the reset", 401)(newClient(c.api).do("GET", "/api/auth/me", nil, map[string]string{"Authorization": "Bearer " + tok.Token}, nil))
	c.stop(t)
}

// TestBootstrapAfterBind: a port clash stops the start before the
// bootstrap admin exists, so its one-time password is not used up.
func TestBootstrapAfterBind(t *testing.T) {
	// Its own data dir and ports: independent of the others, mostly waiting on its process.
	t.Parallel()
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
