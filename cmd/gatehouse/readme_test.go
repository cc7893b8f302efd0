package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

const (
	readmePath = "../../README.md"
	// readmeMCP is the npm project pinning the MCP server the README
	// launches with npx (make gw-test-deps installs it).
	readmeMCP = "../../httpapi/gateway/testdata/gwclient"
	// readmeServer and readmeSkip mark the ```sh block after them.
	readmeServer = "server"
	readmeSkip   = "skip"
)

// TestREADME pastes README.md the way its quick start tells a new user to,
// so that the README cannot drift from the product:
//
//   - the block marked <!-- readme-test: server --> runs first, in a bash
//     of its own where make only records its arguments and the GATEHOUSE_*
//     variables it was given; the test then starts the real binary as
//     `make run` would with them (serve --data-dir ./data [--config]
//     [--demo-echo], in the same directory), on free loopback ports;
//   - every other ```sh block, but those marked <!-- readme-test: skip -->,
//     runs in order in ONE bash (set -Eeuo pipefail) in the same
//     directory, with the README's base URLs pointed at that server and
//     the MCP server it launches with npx replaced by the copy pinned in
//     httpapi/gateway/testdata/gwclient (no registry);
//   - every example answer (a comment that starts with `{`, `data: ` or
//     `X-`) must be in the output, in the README's order, `…` standing for
//     anything; no answer may be an error.
func TestREADME(t *testing.T) {
	bash := lookTool(t, "bash", "")
	for _, tool := range []string{"curl", "jq", "zip", "openssl", "base64"} {
		lookTool(t, tool, "run `make test-deps`")
	}
	node := lookTool(t, "node", "install Node.js 20+")
	mcpVersion, mcpScript := readmeEverything(t)
	md, err := os.ReadFile(readmePath)
	if err != nil {
		t.Fatal(err)
	}
	var server *readmeBlock
	var walk []readmeBlock
	for _, b := range readmeBlocks(t, string(md)) {
		switch b.mark {
		case readmeServer:
			if server != nil {
				t.Fatalf("README.md:%d: a second server block (the first is at line %d)", b.line, server.line)
			}
			server = &b
		case "":
			walk = append(walk, b)
		}
	}
	if server == nil || len(walk) < 5 {
		t.Fatalf("README.md: want a block marked <!-- readme-test: server --> and the walk-through's blocks, found %d blocks", len(walk))
	}

	dir, home := t.TempDir(), t.TempDir()
	env := append(environWithout("GATEHOUSE_"), "HOME="+home, "TMPDIR="+t.TempDir())
	c := startREADMEServer(t, bash, dir, *server, env)
	script, origin := readmeScript(t, walk, []readmeRewrite{
		{"http://127.0.0.1:8080", c.api},
		{"http://127.0.0.1:18790", c.gateway},
		{`"command":"npx","args":["-y","@modelcontextprotocol/server-everything@` + mcpVersion + `"]`,
			fmt.Sprintf(`"command":%q,"args":[%q]`, node, mcpScript)},
	})

	start := time.Now()
	var stdout bytes.Buffer
	logs := &syncBuffer{}
	err = runBash(t, bash, dir, env, script, io.MultiWriter(&stdout, logs), logs)
	out := stdout.String()
	t.Logf("the walk-through took %v", time.Since(start).Round(time.Millisecond))
	if err != nil {
		t.Fatalf("the walk-through failed: %v\n%s\nserver:\n%s", err, readmeLines(logs.String(), origin), c.logs.String())
	}
	if bad := regexp.MustCompile(`"error":\s*(\{|"[^"])|"valid":false`).FindStringIndex(out); bad != nil {
		t.Errorf("an answer is an error: …%s…\n%s", out[max(0, bad[0]-200):min(len(out), bad[1]+200)], out)
	}
	checkAnswers(t, walk, out)
	if !strings.Contains(out, "image/png\n") {
		t.Errorf("the uploaded PNG was not served back as image/png:\n%s", out)
	}
	c.stop(t)
}

// readmeBlock is one ```sh block of the README.
type readmeBlock struct {
	line int    // README line of its first command, 1-based
	mark string // "", readmeSkip or readmeServer
	text string
}

var readmeMark = regexp.MustCompile(`^<!-- readme-test: (\S+) -->$`)

// readmeBlocks returns the ```sh blocks of md, each with the mark on the
// line just before it. A mark anywhere else, or an unknown one, is fatal.
func readmeBlocks(tb testing.TB, md string) []readmeBlock {
	tb.Helper()
	lines := strings.Split(md, "\n")
	var blocks []readmeBlock
	var cur *readmeBlock
	inOther := false
	for i, line := range lines {
		switch {
		case cur != nil && line == "```":
			blocks = append(blocks, *cur)
			cur = nil
		case cur != nil:
			cur.text += line + "\n"
		case inOther:
			inOther = line != "```"
		case line == "```sh":
			cur = &readmeBlock{line: i + 2}
			if i > 0 {
				if m := readmeMark.FindStringSubmatch(lines[i-1]); m != nil {
					cur.mark = m[1]
				}
			}
		case strings.HasPrefix(line, "```"):
			inOther = true
		case strings.Contains(line, "readme-test"):
			m := readmeMark.FindStringSubmatch(line)
			if m == nil || (m[1] != readmeSkip && m[1] != readmeServer) || i+1 >= len(lines) || lines[i+1] != "```sh" {
				tb.Fatalf("README.md:%d: %q: want <!-- readme-test: skip --> or <!-- readme-test: server --> just before a ```sh block", i+1, line)
			}
		}
	}
	if cur != nil {
		tb.Fatalf("README.md:%d: unclosed ```sh block", cur.line-1)
	}
	return blocks
}

// readmeRewrite replaces what only a user's machine has (the default
// ports, the npm registry) in the pasted text.
type readmeRewrite struct{ old, new string }

// readmeScript joins blocks into one bash script, rewritten; origin maps
// each script line (1-based) to its README line.
func readmeScript(tb testing.TB, blocks []readmeBlock, rewrites []readmeRewrite) (script string, origin map[int]int) {
	tb.Helper()
	var b strings.Builder
	b.WriteString("set -Eeuo pipefail\n")
	b.WriteString(`trap 'printf "\nreadme-test: line %s: exit %s: %s\n" "$LINENO" "$?" "$BASH_COMMAND" >&2' ERR` + "\n")
	origin = map[int]int{}
	n := 2
	for _, blk := range blocks {
		for i, line := range strings.Split(strings.TrimSuffix(blk.text, "\n"), "\n") {
			n++
			origin[n] = blk.line + i
			b.WriteString(line + "\n")
		}
	}
	script = b.String()
	for _, r := range rewrites {
		if !strings.Contains(script, r.old) {
			tb.Fatalf("the README's walk-through no longer has %q: update TestREADME", r.old)
		}
		script = strings.ReplaceAll(script, r.old, r.new)
	}
	return script, origin
}

// readmeLines turns the ERR trap's script lines into README lines.
func readmeLines(logs string, origin map[int]int) string {
	return regexp.MustCompile(`readme-test: line (\d+):`).ReplaceAllStringFunc(logs, func(s string) string {
		n, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(s, "readme-test: line "), ":"))
		return fmt.Sprintf("README.md:%d:", origin[n])
	})
}

// runBash runs script with bash in dir, killing its process group when
// the test's time is nearly up.
func runBash(tb testing.TB, bash, dir string, env []string, script string, stdout, stderr io.Writer) error {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	path := filepath.Join(tb.TempDir(), "readme.sh")
	if err := os.WriteFile(path, []byte(script), 0o600); err != nil {
		tb.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, bash, path)
	cmd.Dir, cmd.Env, cmd.Stdout, cmd.Stderr = dir, env, stdout, stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	return cmd.Run()
}

// startREADMEServer runs the README's server block with make standing in
// for the Makefile, then starts the binary as `make run` would with the
// arguments and GATEHOUSE_* variables the block gave make.
func startREADMEServer(t *testing.T, bash, dir string, block readmeBlock, env []string) *child {
	t.Helper()
	rec := t.TempDir()
	shim := `make() {
	[ "${1:-}" = run ] || { echo "readme-test: the server block runs make $*, want make run" >&2; return 1; }
	shift
	printf '%s\0' "$@" > "$READMETEST_MAKE/args"
	env -0 > "$READMETEST_MAKE/env"
}
set -Eeuo pipefail
`
	var logs syncBuffer
	if err := runBash(t, bash, dir, slices.Concat(env, []string{"READMETEST_MAKE=" + rec}), shim+block.text, &logs, &logs); err != nil {
		t.Fatalf("README.md:%d: the server block: %v\n%s", block.line, err, logs.String())
	}
	args, err := os.ReadFile(filepath.Join(rec, "args"))
	if err != nil {
		t.Fatalf("README.md:%d: the server block does not run make run", block.line)
	}
	dataDir, config, demo := "./data", "", false // the Makefile's defaults
	for _, a := range strings.Split(strings.TrimSuffix(string(args), "\x00"), "\x00") {
		name, value, _ := strings.Cut(a, "=")
		switch name {
		case "":
		case "DATA_DIR":
			dataDir = value
		case "CONFIG":
			config = value
		case "DEMO":
			demo = value != ""
		default:
			t.Fatalf("README.md:%d: make run %s: TestREADME knows DATA_DIR, CONFIG and DEMO", block.line, a)
		}
	}
	serve := []string{"serve", "--data-dir", dataDir, "--log-format", "json",
		"--host", "127.0.0.1", "--port", "0", "--gateway-host", "127.0.0.1", "--gateway-port", "0"}
	if config != "" {
		serve = append(serve, "--config", config)
		declareSandboxPath(t, filepath.Join(dir, config), readmeMCP)
	}
	if demo {
		serve = append(serve, "--demo-echo")
	}
	given, err := os.ReadFile(filepath.Join(rec, "env"))
	if err != nil {
		t.Fatal(err)
	}
	env = slices.Clip(env)
	for _, kv := range strings.Split(string(given), "\x00") {
		if strings.HasPrefix(kv, "GATEHOUSE_") {
			env = append(env, kv)
		}
	}
	return startServe(t, dir, env, serve...)
}

// declareSandboxPath adds path (made absolute) to tools.sandbox_paths in
// the config file: the walk-through's MCP server is swapped for the copy
// pinned in the repository, outside /usr, which the tools' sandbox shows
// only when declared (npx, as the README has it, fetches into the
// workspace, which the sandbox shows).
func declareSandboxPath(t *testing.T, configFile, path string) {
	t.Helper()
	abs, err := filepath.Abs(path)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(configFile)
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := json.Unmarshal(b, &cfg); err != nil {
		t.Fatalf("%s: %v", configFile, err)
	}
	tools, _ := cfg["tools"].(map[string]any)
	if tools == nil {
		tools = map[string]any{}
	}
	paths, _ := tools["sandbox_paths"].([]any)
	tools["sandbox_paths"], cfg["tools"] = append(paths, abs), tools
	if b, err = json.Marshal(cfg); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(configFile, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// checkAnswers finds each example answer of blocks in out, in order.
func checkAnswers(t *testing.T, blocks []readmeBlock, out string) {
	t.Helper()
	pos, n := 0, 0
	for _, b := range blocks {
		for i, line := range strings.Split(b.text, "\n") {
			answer, ok := answerComment(line)
			if !ok {
				continue
			}
			n++
			for _, piece := range strings.Split(answer, "…") {
				piece = strings.TrimSpace(piece)
				k := strings.Index(out[pos:], piece)
				if k < 0 {
					t.Fatalf("README.md:%d: the answer %q: %q is not in the output after %q\noutput:\n%s",
						b.line+i, answer, piece, out[max(0, pos-80):pos], out)
				}
				pos += k + len(piece)
			}
		}
	}
	if n < 10 {
		t.Errorf("only %d example answers in the walk-through", n)
	}
}

// answerComment returns the example answer a line's comment shows: one
// that starts with `{` (JSON), `data: ` (a stream) or `X-` (headers).
func answerComment(line string) (string, bool) {
	var c string
	if s := strings.TrimSpace(line); strings.HasPrefix(s, "# ") {
		c = s[2:]
	} else if i := strings.Index(line, " # "); i >= 0 {
		c = strings.TrimSpace(line[i+3:])
	}
	for _, p := range []string{"{", "data: ", "X-"} {
		if strings.HasPrefix(c, p) {
			return c, true
		}
	}
	return "", false
}

// readmeEverything returns the version the gwclient project pins of
// @modelcontextprotocol/server-everything and the path of its script.
func readmeEverything(tb testing.TB) (version, script string) {
	tb.Helper()
	const pkg = "@modelcontextprotocol/server-everything"
	b, err := os.ReadFile(filepath.Join(readmeMCP, "package.json"))
	if err != nil {
		tb.Fatal(err)
	}
	var p struct{ Dependencies map[string]string }
	if err := json.Unmarshal(b, &p); err != nil || p.Dependencies[pkg] == "" {
		tb.Fatalf("%s/package.json does not pin %s: %v", readmeMCP, pkg, err)
	}
	script, err = filepath.Abs(filepath.Join(readmeMCP, "node_modules", pkg, "dist/index.js"))
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := os.Stat(script); err != nil {
		skipOrFail(tb, pkg+" not installed: run `make gw-test-deps`")
	}
	return p.Dependencies[pkg], script
}

// environWithout is the test's environment minus the variables that
// start with prefix.
func environWithout(prefix string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, prefix) {
			env = append(env, kv)
		}
	}
	return env
}
