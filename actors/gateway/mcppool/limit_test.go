package mcppool

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"gatehouse/actors/gateway/toolexec"
	"gatehouse/actors/gateway/toolexec/toolexectest"
)

const (
	// floodLimit is the tests' MaxMessageBytes; floodBytes what a
	// flooding server sends: 256 times more.
	floodLimit = 256 << 10
	floodBytes = 64 << 20
	// floodAllocs is the most the gateway may allocate while refusing a
	// flood: a few times the limit, nowhere near the flood.
	floodAllocs = 8 << 20
)

// floodEnv makes the test binary a stdio server that answers its first
// message with a never-ending line of floodBytes (serveFlood).
const floodEnv = "MCPPOOL_TEST_FLOOD"

// serveFlood reads one message and answers it with floodBytes of one
// JSON string that never closes.
func serveFlood() {
	_, _ = bufio.NewReader(os.Stdin).ReadBytes('\n')
	_ = writeFlood(os.Stdout, `{"jsonrpc":"2.0","id":1,"result":{"x":"`, nil)
}

// writeFlood writes prefix and then floodBytes of 'A' in 64 KiB writes,
// counting them in sent, until done or a write fails.
func writeFlood(w io.Writer, prefix string, sent *atomic.Int64) error {
	if _, err := io.WriteString(w, prefix); err != nil {
		return err
	}
	chunk := bytes.Repeat([]byte{'A'}, 64<<10)
	for n := 0; n < floodBytes; n += len(chunk) {
		if _, err := w.Write(chunk); err != nil {
			return err
		}
		if sent != nil {
			sent.Add(int64(len(chunk)))
		}
		if f, ok := w.(http.Flusher); ok {
			f.Flush()
		}
	}
	return nil
}

// floodHTTP is a streamable-HTTP MCP server: a real SDK server (tools
// echo and big) whose answers to the methods in flood are replaced by a
// flood of content type ct (application/json or text/event-stream).
func floodHTTP(t *testing.T, ct string, flood ...string) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	s := mcp.NewServer(&mcp.Implementation{Name: "flood", Version: "1"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "echo"}, func(_ context.Context, _ *mcp.CallToolRequest, in struct {
		Text string `json:"text"`
	}) (*mcp.CallToolResult, struct{}, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: in.Text}}}, struct{}{}, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "big"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, struct{}, error) {
		return nil, struct{}{}, errors.New("not reached: the flood answers")
	})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, &mcp.StreamableHTTPOptions{JSONResponse: true})
	var sent atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var msg struct {
			Method string `json:"method"`
		}
		_ = json.Unmarshal(body, &msg)
		for _, m := range flood {
			if msg.Method == m {
				w.Header().Set("Content-Type", ct)
				prefix := `{"jsonrpc":"2.0","id":1,"result":{"x":"`
				if ct == "text/event-stream" {
					prefix = "event: message\ndata: " + prefix
				}
				_ = writeFlood(w, prefix, &sent)
				return
			}
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv, &sent
}

// allocated is what f allocated, in bytes (the whole process: the tests
// that call it run one at a time).
func allocated(f func()) uint64 {
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestFloodRefused (issue 31): an MCP server that answers with a message
// far larger than MaxMessageBytes (64 MiB against 256 KiB), over
// streamable HTTP (a JSON reply, an SSE event) or stdio, at initialize or
// in a tool's reply, is cut off after about MaxMessageBytes: the gateway
// allocates a few times the limit, not the flood; the caller gets
// ErrTooLarge at once, the server's status says so naming the setting,
// and the pool goes on serving (another server, and the same one again).
func TestFloodRefused(t *testing.T) {
	self, err := filepath.Abs(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	p := New(Config{MaxMessageBytes: floodLimit}, nil, nil) // the HTTP servers' pool
	defer p.Close()
	stdio := func(env ...string) Spec {
		e := map[string]string{serverEnv: "1"}
		for i := 0; i+1 < len(env); i += 2 {
			e[env[i]] = env[i+1]
		}
		return Spec{ID: uuid.New(), Name: "flood", Transport: Stdio, Command: self, Args: []string{"-test.run=^$"}, Env: e,
			Workspace: t.TempDir(), Timeout: 20 * time.Second}
	}
	jsonInit, jsonSent := floodHTTP(t, "application/json", "initialize")
	sseInit, sseSent := floodHTTP(t, "text/event-stream", "initialize")
	jsonCall, callSent := floodHTTP(t, "application/json", "tools/call")
	healthy, _ := floodHTTP(t, "application/json")
	tests := []struct {
		name string
		spec Spec
		call bool          // the flood answers a tool call (the connection is up before)
		sent *atomic.Int64 // what the server managed to send (nil: a stdio server)
		// bytes is the text the stdio server's tool answers (it builds it
		// whole: smaller, for speed, still 16 times the limit).
		bytes int
	}{
		{"http json initialize", Spec{ID: uuid.New(), Name: "flood", Transport: Streamable, URL: jsonInit.URL}, false, jsonSent, 0},
		{"http sse initialize", Spec{ID: uuid.New(), Name: "flood", Transport: Streamable, URL: sseInit.URL}, false, sseSent, 0},
		{"http json tool reply", Spec{ID: uuid.New(), Name: "flood", Transport: Streamable, URL: jsonCall.URL, Timeout: 20 * time.Second}, true, callSent, 0},
		{"stdio initialize", stdio(floodEnv, "1"), false, nil, 0},
		{"stdio tool reply", stdio(), true, nil, 16 * floodLimit},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			p := p
			if tt.spec.Transport == Stdio { // as in production: in the bwrap sandbox
				sb := toolexectest.Bwrap(t, toolexec.SandboxConfig{ReadOnly: []string{filepath.Dir(self)}})
				p = New(Config{MaxMessageBytes: floodLimit}, sb, nil)
				defer p.Close()
			}
			if tt.call {
				if _, err := p.Tools(ctx, tt.spec); err != nil {
					t.Fatalf("Tools before the flood: %v", err)
				}
			}
			var ferr error
			start := time.Now()
			allocs := allocated(func() {
				if tt.call {
					_, ferr = p.Call(ctx, tt.spec, "big", json.RawMessage(`{"bytes":`+strconv.Itoa(tt.bytes)+`}`))
				} else {
					_, ferr = p.Tools(ctx, tt.spec)
				}
			})
			if !errors.Is(ferr, ErrTooLarge) || !errors.Is(ferr, ErrUnavailable) {
				t.Errorf("the flood = %v, want ErrTooLarge and ErrUnavailable", ferr)
			}
			if took := time.Since(start); took > 10*time.Second {
				t.Errorf("the flood took %s to refuse", took)
			}
			if allocs > floodAllocs {
				size := floodBytes
				if tt.bytes > 0 {
					size = tt.bytes
				}
				t.Errorf("refusing a %d MiB message allocated %d MiB (limit %d KiB), want under %d MiB", size>>20, allocs>>20, floodLimit>>10, floodAllocs>>20)
			}
			if tt.sent != nil && tt.sent.Load() > floodBytes/2 {
				t.Errorf("the server sent %d MiB before the gateway hung up, want the connection dropped", tt.sent.Load()>>20)
			}
			t.Logf("refused after %s, %d KiB allocated", time.Since(start).Round(time.Millisecond), allocs>>10)
			st := p.Peek(tt.spec.ID)
			if st.Connected || !strings.Contains(st.Error, "gateway.mcp_max_message_bytes") || !strings.Contains(st.Error, strconv.Itoa(floodLimit)) {
				t.Errorf("status after the flood = %+v, want down, naming the limit and its setting", st)
			}
			// The pool serves on: another server, and this one again once
			// its backoff allows (a tool reply's flood leaves it healthy).
			h := Spec{ID: uuid.New(), Name: "healthy", Transport: Streamable, URL: healthy.URL}
			if out, err := p.Call(ctx, h, "echo", json.RawMessage(`{"text":"still here"}`)); err != nil || out != "still here" {
				t.Errorf("another server after the flood: %q, %v", out, err)
			}
			if tt.call {
				time.Sleep(minBackoff)
				if tools, err := p.Tools(ctx, tt.spec); err != nil || len(tools) == 0 {
					t.Errorf("the flooding server reconnected: %v, %v", tools, err)
				}
			}
		})
	}
}

// TestReadersBoundEachMessage: the readers bound each message, not the
// stream: many messages under the limit pass, one over it fails with
// ErrTooLarge, however its lines are split (an SSE event of many data
// lines, a stdio value printed over many lines, brackets and escaped
// quotes inside its strings).
func TestReadersBoundEachMessage(t *testing.T) {
	const limit = 64
	pad := func(n int) string { return strings.Repeat("x", n) }
	tests := []struct {
		name    string
		events  bool // an SSE stream; else stdio values
		in      string
		tooLong bool
	}{
		{"events under the limit", true, strings.Repeat("data: "+pad(50)+"\n\n", 100), false},
		{"events with CRLF", true, strings.Repeat("data: "+pad(50)+"\r\n\r\n", 100), false},
		{"events with CR", true, strings.Repeat("data: "+pad(50)+"\r\r", 100), false},
		{"one event of many lines", true, "data: " + pad(50) + "\n\n" + strings.Repeat("data: "+pad(20)+"\n", 4) + "\n", true},
		{"one long event", true, "data: " + pad(100) + "\n\n", true},
		{"values under the limit", false, strings.Repeat(`{"a":"`+pad(40)+`"}`+"\n", 100), false},
		{"values on one line", false, strings.Repeat(`{"a":"`+pad(40)+`"}`, 100), false},
		{"brackets and quotes in strings", false, strings.Repeat(`{"a":"}}]]\"{{`+pad(30)+`"}`+"\n", 100), false},
		{"one value over many lines", false, "{\n" + strings.Repeat(`"a":"`+pad(20)+"\",\n", 4) + `"b":1}` + "\n", true},
		{"one long value", false, `{"a":"` + pad(100) + `"}` + "\n", true},
	}
	for _, tt := range tests {
		b := newBound(limit)
		var r io.Reader = &valueReader{rc: io.NopCloser(strings.NewReader(tt.in)), b: b}
		if tt.events {
			r = &eventReader{rc: io.NopCloser(strings.NewReader(tt.in)), b: b}
		}
		_, err := io.Copy(io.Discard, r)
		if tooLong := errors.Is(err, ErrTooLarge); tooLong != tt.tooLong || (err != nil && !tooLong) {
			t.Errorf("%s: read = %v, want too long %v", tt.name, err, tt.tooLong)
		}
	}
}
