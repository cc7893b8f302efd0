package mcppool

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"gatehouse/actors/gateway/toolexec"
	"gatehouse/actors/gateway/toolexec/toolexectest"
)

// serverEnv makes the test binary a stdio MCP server (serveMCP).
const serverEnv = "MCPPOOL_TEST_SERVER"

func TestMain(m *testing.M) {
	if os.Getenv(floodEnv) == "1" {
		serveFlood()
		return
	}
	if os.Getenv(serverEnv) == "1" {
		serveMCP()
		return
	}
	os.Exit(m.Run())
}

// probe is what the test server sees of its surroundings.
type probe struct {
	Environ     []string `json:"environ"`
	Pid1Environ []string `json:"pid1_environ"`
	PPidEnviron []string `json:"ppid_environ"`
	Pids        []string `json:"pids"`
	MasterKey   string   `json:"master_key"`
	DataDir     []string `json:"data_dir"`
	// CacheErr is what writing into $npm_config_cache gave ("" when it
	// worked).
	CacheErr string `json:"cache_err"`
}

// serveMCP serves three tools on stdio: probe, spawn, which starts a
// detached `setsid sleep <marker>`, and big, which answers with a text of
// the bytes asked for.
func serveMCP() {
	if ms, err := strconv.Atoi(os.Getenv("MCPPOOL_TEST_DELAY_MS")); err == nil {
		time.Sleep(time.Duration(ms) * time.Millisecond) // a slow first start (npx downloading)
	}
	s := mcp.NewServer(&mcp.Implementation{Name: "probe", Version: "1"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "probe"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, probe, error) {
		var p probe
		p.Environ = os.Environ()
		p.Pid1Environ = environOf("1")
		p.PPidEnviron = environOf(strconv.Itoa(os.Getppid()))
		ents, _ := os.ReadDir("/proc")
		for _, e := range ents {
			if _, err := strconv.Atoi(e.Name()); err == nil {
				p.Pids = append(p.Pids, e.Name())
			}
		}
		if b, err := os.ReadFile("../../master.key"); err == nil {
			p.MasterKey = string(b)
		}
		ents, _ = os.ReadDir("../..")
		for _, e := range ents {
			p.DataDir = append(p.DataDir, e.Name())
		}
		p.CacheErr = "npm_config_cache unset"
		if dir := os.Getenv("npm_config_cache"); dir != "" {
			p.CacheErr = ""
			if err := os.WriteFile(filepath.Join(dir, "written-by-"+strconv.Itoa(os.Getpid())), []byte("x"), 0o600); err != nil {
				p.CacheErr = err.Error()
			}
		}
		return nil, p, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "spawn"}, func(_ context.Context, _ *mcp.CallToolRequest, in struct {
		Marker string `json:"marker"`
	}) (*mcp.CallToolResult, struct{}, error) {
		cmd := exec.Command("setsid", "sleep", in.Marker)
		return nil, struct{}{}, cmd.Start()
	})
	mcp.AddTool(s, &mcp.Tool{Name: "big"}, func(_ context.Context, _ *mcp.CallToolRequest, in struct {
		Bytes int `json:"bytes"`
	}) (*mcp.CallToolResult, struct{}, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strings.Repeat("A", in.Bytes)}}}, struct{}{}, nil
	})
	_ = s.Run(context.Background(), &mcp.StdioTransport{MaxLineLength: -1})
}

func environOf(pid string) []string {
	b, _ := os.ReadFile("/proc/" + pid + "/environ")
	return strings.FieldsFunc(string(b), func(r rune) bool { return r == 0 })
}

// TestStdioSandboxed: a stdio MCP server runs in the sandbox: it sees its
// own environment only (and so does every process it can see), no other
// process of the host, and nothing of the data dir around its
// workspace; what it starts, setsid or not, dies with its connection.
func TestStdioSandboxed(t *testing.T) {
	self, err := filepath.Abs(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	dataDir := filepath.Join(t.TempDir(), "data")
	ws := filepath.Join(dataDir, "workspaces", "mcp-x")
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dataDir, "master.key"), []byte("the-master-key"), 0o600); err != nil {
		t.Fatal(err)
	}
	sb := toolexectest.Bwrap(t, toolexec.SandboxConfig{ReadOnly: []string{filepath.Dir(self)}, Hide: []string{dataDir}})
	p := New(Config{}, sb, nil)
	defer p.Close()
	cache := filepath.Join(dataDir, "workspaces", "mcp-npm-cache")
	spec := Spec{ID: uuid.New(), Name: "probe", Transport: Stdio, Command: self, Args: []string{"-test.run=^$"},
		Env: map[string]string{serverEnv: "1", "DECLARED": "yes"}, Workspace: ws, Cache: cache, Timeout: 10 * time.Second}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := p.Call(ctx, spec, "probe", json.RawMessage(`{}`))
	if err != nil {
		t.Fatalf("probe: %v (%s)", err, out)
	}
	var got probe
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("probe printed %q: %v", out, err)
	}
	allowed := []string{"PATH", "HOME", "TMPDIR", "LANG", "PWD", serverEnv, "DECLARED", "npm_config_cache"}
	for name, env := range map[string][]string{"its own": got.Environ, "pid 1's": got.Pid1Environ, "its parent's": got.PPidEnviron} {
		for _, kv := range env {
			if k, _, _ := strings.Cut(kv, "="); !slices.Contains(allowed, k) {
				t.Errorf("%s environment holds %s, beyond the server's declared env", name, kv)
			}
		}
	}
	if !slices.Contains(got.Environ, "DECLARED=yes") {
		t.Errorf("environ = %q, want the declared DECLARED=yes", got.Environ)
	}
	if len(got.Pids) > 3 {
		t.Errorf("the server sees %d processes (%v), want its sandbox's only", len(got.Pids), got.Pids)
	}
	if got.MasterKey != "" || slices.Contains(got.DataDir, "master.key") {
		t.Errorf("the server saw the data dir: %v, key %q", got.DataDir, got.MasterKey)
	}
	// The shared npm cache is the one directory beside its workspace it
	// may write: what one server's npx fetched, the next one finds.
	if ents, err := os.ReadDir(cache); got.CacheErr != "" || err != nil || len(ents) != 1 {
		t.Errorf("the shared npm cache: %s; on the host %d entries (%v)", got.CacheErr, len(ents), err)
	}

	marker := toolexectest.Marker()
	if _, err := p.Call(ctx, spec, "spawn", json.RawMessage(`{"marker":"`+marker+`"}`)); err != nil {
		t.Fatalf("spawn: %v", err)
	}
	p.Forget(spec.ID)
	toolexectest.NoneLeft(t, marker)
}

// TestStdioRefusedWithoutSandbox: with no working sandbox a stdio server
// does not start, and the error says why.
func TestStdioRefusedWithoutSandbox(t *testing.T) {
	broken, err := toolexec.NewSandbox(toolexec.SandboxConfig{Mode: toolexec.SandboxBwrap, Bwrap: filepath.Join(t.TempDir(), "no-bwrap")})
	if err != nil {
		t.Fatal(err)
	}
	for name, sb := range map[string]*toolexec.Sandbox{"bwrap missing": broken, "no sandbox": nil} {
		t.Run(name, func(t *testing.T) {
			p := New(Config{}, sb, nil)
			defer p.Close()
			marker := filepath.Join(t.TempDir(), "started")
			spec := Spec{ID: uuid.New(), Name: "s", Transport: Stdio, Command: "touch", Args: []string{marker}, Workspace: t.TempDir()}
			_, err := p.Tools(context.Background(), spec)
			if !errors.Is(err, ErrUnavailable) || !errors.Is(err, toolexec.ErrNoSandbox) {
				t.Errorf("Tools = %v, want ErrUnavailable and ErrNoSandbox", err)
			}
			if _, err := os.Stat(marker); err == nil {
				t.Error("the server's command ran without its sandbox")
			}
		})
	}
}
