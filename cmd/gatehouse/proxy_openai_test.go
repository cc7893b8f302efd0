package main

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// openaiClientDir holds a package pinning the official openai npm client;
// `make test` runs `npm ci` there first.
const openaiClientDir = "testdata/openaiclient"

// requireNode returns the path of node once the openai package is
// installed. Without them the test is skipped, except in CI (CI=true),
// where it fails.
func requireNode(tb testing.TB) string {
	tb.Helper()
	hint := "run `npm ci --prefix cmd/gatehouse/" + openaiClientDir + "` (make test does)"
	node := lookTool(tb, "node", hint)
	if _, err := os.Stat(filepath.Join(openaiClientDir, "node_modules", "openai", "package.json")); err != nil {
		skipOrFail(tb, "openai package not installed: "+hint)
	}
	return node
}

// TestOpenAIClient points the official openai npm client, unchanged, at
// {base}/api/proxy/llm/v1 with a gatehouse key as its API key: plain and
// streamed chat completions, a model list, the rate-limit headers and a
// refused key. The streamed completion's first chunk must reach the
// client while the upstream holds the rest back.
func TestOpenAIClient(t *testing.T) {
	node := requireNode(t)
	c, stub := startProxyChild(t)
	o := newKeyOwner(t, c)
	cmd := exec.Command(node, "client.mjs", c.api+"/api/proxy/llm/v1", o.key.Key)
	cmd.Dir = openaiClientDir
	var stderr syncBuffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
	})
	lines := make(chan []byte)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- append([]byte(nil), sc.Bytes()...)
		}
		close(lines)
		done <- cmd.Wait()
	}()

	var msg struct {
		First  *string
		Result *struct {
			Completion     string
			Usage          int
			Models         []string
			Deltas         []string
			Finish         string
			RateLimitLimit string
			BadKey         any
		}
	}
	next := func(what string) {
		t.Helper()
		select {
		case line, ok := <-lines:
			if !ok {
				t.Fatalf("node exited before %s:\n%s", what, stderr.String())
			}
			if err := json.Unmarshal(line, &msg); err != nil {
				t.Fatalf("node printed %q: %v", line, err)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("no %s from node:\n%s", what, stderr.String())
		}
	}
	next("first chunk")
	if msg.First == nil || *msg.First != "one" {
		t.Fatalf("first message = %+v", msg)
	}
	select {
	case <-stub.finished:
		t.Fatal("upstream finished before the client saw the first chunk")
	default:
	}
	stub.release()
	next("result")
	r := msg.Result
	if r == nil {
		t.Fatalf("no result:\n%s", stderr.String())
	}
	want := []string{"one", " two", " three", ""}
	if r.Completion != "echo: hello" || r.Usage != 3 || !slices.Equal(r.Models, []string{"stub-model"}) ||
		!slices.Equal(r.Deltas, want) || r.Finish != "stop" || r.RateLimitLimit != "10000" || r.BadKey != float64(401) {
		t.Errorf("openai client saw %+v", *r)
	}
}
