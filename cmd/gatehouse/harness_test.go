package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

const (
	adminEmail    = "root@example.com"
	adminPassword = "crash-test-password"
)

// buildBinary builds gatehouse once per test binary run.
var buildBinary = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "gatehouse-bin-")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "gatehouse")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build: %v\n%s", err, out)
	}
	return bin, nil
})

// child is a real gatehouse process.
type child struct {
	cmd     *exec.Cmd
	api     string // http://host:port
	gateway string
	metrics chan string // the metrics listener's base URL, if configured
	logs    *syncBuffer
	done    chan struct{}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// writeConfig writes a JSON config for a test server on free ports.
func writeConfig(tb testing.TB, dataDir string, extra map[string]any) string {
	tb.Helper()
	cfg := map[string]any{
		"data_dir": dataDir,
		"log":      map[string]any{"format": "json", "level": "info"},
		"server":   map[string]any{"host": "127.0.0.1", "port": 0},
		"gateway":  map[string]any{"host": "127.0.0.1", "port": 0},
	}
	for k, v := range extra {
		cfg[k] = v
	}
	b, err := json.Marshal(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	path := filepath.Join(tb.TempDir(), "config.json")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		tb.Fatal(err)
	}
	return path
}

// skipOrFail skips the test for a missing tool or package, and fails it
// under CI=true, where everything must be there.
func skipOrFail(tb testing.TB, msg string) {
	tb.Helper()
	if os.Getenv("CI") == "true" {
		tb.Fatal(msg)
	}
	tb.Skip(msg)
}

// eventually polls cond every 10 ms until it holds (true) or timeout
// passes (false).
func eventually(timeout time.Duration, cond func() bool) bool {
	for deadline := time.Now().Add(timeout); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			return false
		}
	}
	return true
}

// lookTool returns the path of a tool the test needs; a missing one skips
// the test, or fails it under CI=true (skipOrFail).
func lookTool(tb testing.TB, name, hint string) string {
	tb.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		skipOrFail(tb, strings.TrimSuffix(name+" not found: "+hint, ": "))
	}
	return p
}

// startChild starts the binary on configPath, with the bootstrap admin's
// email and password, and waits until both listeners are up.
func startChild(tb testing.TB, configPath string) *child {
	tb.Helper()
	env := append(os.Environ(), "GATEHOUSE_ADMIN_EMAIL="+adminEmail, "GATEHOUSE_ADMIN_PASSWORD="+adminPassword)
	return startServe(tb, "", env, "serve", "--config", configPath)
}

// startServe starts the binary in dir ("" for this one) with args and env
// (a JSON log) and waits until both listeners are up; a metrics
// listener's address arrives on c.metrics.
func startServe(tb testing.TB, dir string, env []string, args ...string) *child {
	tb.Helper()
	bin, err := buildBinary()
	if err != nil {
		tb.Fatal(err)
	}
	return startProgram(tb, dir, env, append([]string{bin}, args...))
}

// startProgram is startServe for a command line argv that runs the
// binary, possibly through another program (prlimit).
func startProgram(tb testing.TB, dir string, env []string, argv []string) *child {
	tb.Helper()
	c := &child{logs: &syncBuffer{}, done: make(chan struct{}), metrics: make(chan string, 1)}
	c.cmd = exec.Command(argv[0], argv[1:]...)
	c.cmd.Dir, c.cmd.Env = dir, env
	pr, pw := io.Pipe()
	c.cmd.Stderr = io.MultiWriter(pw, c.logs)
	if err := c.cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	go func() { _ = c.cmd.Wait(); pw.Close(); close(c.done) }()
	addrs := make(chan map[string]string, 1)
	go func() {
		got := map[string]string{}
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			var line struct{ Msg, Listener, Addr string }
			if json.Unmarshal(sc.Bytes(), &line) != nil || line.Msg != "listening" {
				continue
			}
			if line.Listener == "metrics" {
				c.metrics <- "http://" + line.Addr
				continue
			}
			got[line.Listener] = "http://" + line.Addr
			if got["api"] != "" && got["gateway"] != "" {
				addrs <- got
			}
		}
		_, _ = io.Copy(io.Discard, pr)
	}()
	select {
	case a := <-addrs:
		c.api, c.gateway = a["api"], a["gateway"]
	case <-c.done:
		tb.Fatalf("gatehouse exited early:\n%s", c.logs.String())
	case <-time.After(30 * time.Second):
		c.kill()
		tb.Fatalf("gatehouse did not start:\n%s", c.logs.String())
	}
	tb.Cleanup(c.kill)
	return c
}

func (c *child) kill() {
	_ = c.cmd.Process.Kill()
	<-c.done
}

// stop sends SIGTERM and waits for a clean exit.
func (c *child) stop(tb testing.TB) {
	tb.Helper()
	_ = c.cmd.Process.Signal(os.Interrupt)
	select {
	case <-c.done:
	case <-time.After(30 * time.Second):
		tb.Fatalf("no clean exit:\n%s", c.logs.String())
	}
	if c.cmd.ProcessState.ExitCode() != 0 {
		tb.Fatalf("exit code %d:\n%s", c.cmd.ProcessState.ExitCode(), c.logs.String())
	}
}

// client is an HTTP client with a cookie jar (a logged-in session).
type client struct {
	base string
	hc   *http.Client
}

func newClient(base string) *client {
	jar, _ := cookiejar.New(nil)
	return &client{base: base, hc: &http.Client{Jar: jar, Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}}
}

// do sends a JSON request and decodes a JSON answer into out (if not nil).
func (c *client) do(method, path string, body any, hdr map[string]string, out any) (int, error) {
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, c.base+path, rd)
	if err != nil {
		return 0, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, err
	}
	if out != nil && len(b) > 0 && strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		if err := json.Unmarshal(b, out); err != nil {
			return resp.StatusCode, fmt.Errorf("decode %s %s: %w: %s", method, path, err, b)
		}
	}
	return resp.StatusCode, nil
}

func (c *client) login(tb testing.TB, email, password string) {
	tb.Helper()
	code, err := c.do("POST", "/api/auth/login", map[string]string{"email": email, "password": password}, nil, nil)
	if err != nil || code != 200 {
		tb.Fatalf("login = %d, %v", code, err)
	}
}

type createdKey struct {
	ID   string `json:"id"`
	Key  string `json:"key"`
	Name string `json:"name"`
}

type keyDetail struct {
	Key struct {
		ID         string `json:"id"`
		IsActive   bool   `json:"isActive"`
		UsageCount int64  `json:"usageCount"`
		RateLimit  int64  `json:"rateLimit"`
	} `json:"key"`
}

// upstream is a stub service that answers every request with a small JSON body.
func upstream(tb testing.TB) string {
	tb.Helper()
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"ok":true}`))
	})}
	ln, err := listenLoopback()
	if err != nil {
		tb.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	tb.Cleanup(func() { _ = srv.Close() })
	return "http://" + ln.Addr().String()
}
