// Package mcppool keeps the gateway's connections to MCP servers, one per
// server, through the official Go SDK: stdio servers are started under
// the same rules as custom tools (in the tools' sandbox, which shows them
// their workspace and the system directories only; no shell, only their
// own environment and a minimal PATH, their process group, and with it
// the sandbox's PID namespace, killed on close; without a working
// sandbox they refuse to start), streamable-HTTP and SSE servers are
// reached with their headers.
// A connection opens on first use, lists the server's tools, and is
// reopened with a doubling backoff (0.5 s to 30 s) after it dies; a
// changed configuration reopens it; Forget closes it. An attempt runs on
// its own clock (up to dialTimeout: a first `npx` may download its
// package for a minute), not its caller's: a caller waits as long as its
// context allows and then gets ErrStarting, and the attempt goes on for
// the next caller. Stdio servers share one npm cache (Spec.Cache), so a
// package is downloaded once for all of them. No message a server sends
// (a JSON reply, an SSE event, a stdio JSON message) is read past
// Config.MaxMessageBytes: beyond it the connection is dropped, and its
// status is ErrTooLarge (limit.go).
package mcppool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/google/uuid"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"gatehouse/actors/gateway/toolexec"
)

// Transports.
const (
	Stdio      = "stdio"
	Streamable = "streamable-http"
	SSE        = "sse"
)

// Spec is one server's connection settings.
type Spec struct {
	ID        uuid.UUID
	Name      string
	Transport string
	Command   string
	Args      []string
	URL       string
	Headers   map[string]string
	Env       map[string]string
	Workspace string // stdio: the working directory (created)
	// Cache, for stdio, is the npm cache every stdio server shares
	// (created; npm_config_cache, shown read-write in the sandbox); empty:
	// npm's default under the workspace (HOME).
	Cache   string
	Timeout time.Duration // per call; 0: 60 s
	Version time.Time     // the configuration's UpdatedAt: a new one reopens
}

// Tool is one of a server's tools.
type Tool struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"input_schema"`
}

// Status is a server's connection as last seen.
type Status struct {
	Connected bool `json:"connected"`
	// Starting: a connection attempt is under way (connected is false).
	Starting bool   `json:"starting,omitempty"`
	Error    string `json:"error,omitempty"`
	Tools    []Tool `json:"tools"`
}

var (
	// ErrUnavailable: the server cannot be reached now (the error says
	// why and when the next attempt is).
	ErrUnavailable = errors.New("mcp server unavailable")
	// ErrStarting: a connection attempt is still under way; retry
	// shortly. It is an ErrUnavailable too.
	ErrStarting = fmt.Errorf("%w: starting", ErrUnavailable)
)

const (
	minBackoff = 500 * time.Millisecond
	maxBackoff = 30 * time.Second
	// dialTimeout bounds one connection attempt, the tool listing
	// included: a first `npx -y pkg` downloads pkg before it answers.
	dialTimeout = 3 * time.Minute
)

// Pool holds the connections. Safe for concurrent use.
type Pool struct {
	cfg    Config
	lg     *slog.Logger
	sb     *toolexec.Sandbox
	client *mcp.Client
	mu     sync.Mutex
	conns  map[uuid.UUID]*conn
	dials  sync.WaitGroup // attempts under way: Close waits for them
}

// conn is one server's connection; its fields are guarded by lock, which
// is held briefly (never while connecting: dial runs apart).
type conn struct {
	lock    chan struct{} // capacity 1: held when full
	spec    Spec
	session *mcp.ClientSession
	cmd     *exec.Cmd
	bound   *bound // the session's message bound
	tools   []Tool
	err     error
	next    time.Time // no attempt before
	backoff time.Duration
	// dialing is closed when the attempt under way ends (nil: none);
	// cancelDial ends it early (Forget, a changed spec).
	dialing    chan struct{}
	cancelDial context.CancelFunc
	forgotten  bool
}

// New returns an empty pool whose stdio servers run in sb (nil: they
// refuse to start, toolexec.ErrNoSandbox). A zero cfg.MaxMessageBytes is
// the default's.
func New(cfg Config, sb *toolexec.Sandbox, lg *slog.Logger) *Pool {
	if lg == nil {
		lg = slog.New(slog.DiscardHandler)
	}
	if cfg.MaxMessageBytes == 0 {
		cfg.MaxMessageBytes = DefaultMaxMessageBytes
	}
	return &Pool{cfg: cfg, lg: lg.With("component", "mcppool"), sb: sb, client: mcp.NewClient(&mcp.Implementation{Name: "gatehouse", Version: "1"}, nil),
		conns: map[uuid.UUID]*conn{}}
}

func (p *Pool) conn(spec Spec) *conn {
	p.mu.Lock()
	defer p.mu.Unlock()
	c := p.conns[spec.ID]
	if c == nil {
		c = &conn{spec: spec, lock: make(chan struct{}, 1)}
		p.conns[spec.ID] = c
	}
	return c
}

// acquire takes c's lock, or gives up when ctx ends first (another
// caller is connecting): ErrUnavailable.
func (c *conn) acquire(ctx context.Context, name string) error {
	select {
	case c.lock <- struct{}{}:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("%w: %s: still connecting: %w", ErrUnavailable, name, ctx.Err())
	}
}

// mustAcquire takes c's lock, however long it takes.
func (c *conn) mustAcquire() { c.lock <- struct{}{} }

func (c *conn) release() { <-c.lock }

// Tools lists spec's tools, connecting first if needed (ErrStarting
// when ctx ends before the connection is up).
func (p *Pool) Tools(ctx context.Context, spec Spec) ([]Tool, error) {
	_, tools, err := p.ready(ctx, spec)
	return tools, err
}

// Status reports spec's connection, trying to connect if it is down and
// its backoff allows, waiting for it as long as ctx allows: connected
// while it is up, starting while an attempt runs.
func (p *Pool) Status(ctx context.Context, spec Spec) Status {
	tools, err := p.Tools(ctx, spec)
	st := Status{Connected: err == nil, Starting: errors.Is(err, ErrStarting), Tools: tools}
	if err != nil {
		st.Error = err.Error()
	}
	if st.Tools == nil {
		st.Tools = []Tool{}
	}
	return st
}

// Starting reports whether a connection attempt to server id is under
// way, without waiting or starting one.
func (p *Pool) Starting(id uuid.UUID) bool { return p.Peek(id).Starting }

// Peek reports server id's connection as it is now, without waiting or
// connecting: connected, starting, or down with the last error ("" for
// a server not used yet).
func (p *Pool) Peek(id uuid.UUID) Status {
	p.mu.Lock()
	c := p.conns[id]
	p.mu.Unlock()
	st := Status{Tools: []Tool{}}
	if c == nil {
		return st
	}
	c.mustAcquire()
	defer c.release()
	st.Connected, st.Starting = c.session != nil, c.dialing != nil
	if c.session != nil && c.tools != nil {
		st.Tools = c.tools
	}
	if c.session == nil && c.err != nil {
		st.Error = fmt.Sprintf("%s: %v", ErrUnavailable, c.err)
	}
	return st
}

// Call runs tool name with args (a JSON object) and returns its text
// output. A tool that reports an error (isError) is an error with that
// output; a connection that fails is ErrUnavailable, and is reopened at
// the next use.
func (p *Pool) Call(ctx context.Context, spec Spec, name string, args json.RawMessage) (string, error) {
	c := p.conn(spec)
	s, _, err := p.ready(ctx, spec)
	if err != nil {
		return "", err
	}
	b := c.boundOf(s)
	timeout := spec.Timeout
	if timeout <= 0 {
		timeout = 60 * time.Second
	}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var a map[string]any
	if err := json.Unmarshal(args, &a); err != nil {
		return "", fmt.Errorf("arguments must be a JSON object: %w", err)
	}
	res, err := s.CallTool(cctx, &mcp.CallToolParams{Name: name, Arguments: a})
	if err != nil {
		if b != nil && b.tripped.Load() { // the reply was too large: the session is dropped already
			p.drop(c, s, b.err())
			return "", fmt.Errorf("%w: %s: %s: %w", ErrUnavailable, spec.Name, name, b.err())
		}
		if cctx.Err() != nil && ctx.Err() == nil {
			return "", fmt.Errorf("mcp %s: %s timed out after %s", spec.Name, name, timeout)
		}
		var werr *jsonrpc.Error
		if errors.As(err, &werr) { // the server answered with an error
			return "", fmt.Errorf("mcp %s: %s: %s", spec.Name, name, werr.Message)
		}
		// The connection failed: drop it, the next use reconnects.
		p.drop(c, s, errors.New("connection lost"))
		return "", fmt.Errorf("%w: %s: connection lost while calling %s: %v", ErrUnavailable, spec.Name, name, err)
	}
	out := textOf(res)
	if res.IsError {
		return out, fmt.Errorf("mcp %s: tool %s reported an error", spec.Name, name)
	}
	return out, nil
}

// drop closes s if it is still c's session, err its status.
func (p *Pool) drop(c *conn, s *mcp.ClientSession, err error) {
	c.mustAcquire()
	defer c.release()
	if c.session == s {
		p.closeLocked(c)
		c.err = err
	}
}

// boundOf is session s's message bound (nil if s is no longer c's).
func (c *conn) boundOf(s *mcp.ClientSession) *bound {
	c.mustAcquire()
	defer c.release()
	if c.session != s {
		return nil
	}
	return c.bound
}

// textOf joins a result's text contents (other contents as JSON).
func textOf(res *mcp.CallToolResult) string {
	var parts []string
	for _, ct := range res.Content {
		if t, ok := ct.(*mcp.TextContent); ok {
			parts = append(parts, t.Text)
			continue
		}
		b, _ := json.Marshal(ct)
		parts = append(parts, string(b))
	}
	if len(parts) == 0 && res.StructuredContent != nil {
		b, _ := json.Marshal(res.StructuredContent)
		parts = append(parts, string(b))
	}
	return strings.Join(parts, "\n")
}

// ready returns spec's session and tools, (re)connecting when it is
// down, its spec changed, and the backoff allows. The attempt runs in
// dial, on its own clock; ready waits for it as long as ctx allows
// (ErrStarting after that).
func (p *Pool) ready(ctx context.Context, spec Spec) (*mcp.ClientSession, []Tool, error) {
	c := p.conn(spec)
	for {
		if err := c.acquire(ctx, spec.Name); err != nil {
			return nil, nil, err
		}
		if !c.spec.Version.Equal(spec.Version) {
			p.closeLocked(c) // a changed configuration: a new connection at once
			c.backoff, c.next = 0, time.Time{}
		}
		c.spec = spec
		if c.session != nil {
			s, tools := c.session, c.tools
			c.release()
			return s, tools, nil
		}
		if c.dialing == nil {
			if now := time.Now(); now.Before(c.next) {
				err := fmt.Errorf("%w: %s: %w (next attempt in %s)", ErrUnavailable, spec.Name, c.err, c.next.Sub(now).Round(time.Millisecond))
				c.release()
				return nil, nil, err
			}
			dctx, cancel := context.WithTimeout(context.Background(), dialTimeout)
			c.dialing, c.cancelDial = make(chan struct{}), cancel
			p.dials.Add(1)
			go p.dial(dctx, cancel, c, spec, c.dialing)
		}
		done := c.dialing
		c.release()
		select {
		case <-done: // the attempt ended: its outcome is on c
		case <-ctx.Done():
			return nil, nil, fmt.Errorf("%w: %s: still connecting (a first start may download the server): %w", ErrStarting, spec.Name, ctx.Err())
		}
	}
}

// dial runs one connection attempt for c with spec and records its
// outcome: the session, or the error and the next attempt's time. An
// attempt whose conn was forgotten or reconfigured meanwhile is closed.
func (p *Pool) dial(ctx context.Context, cancel context.CancelFunc, c *conn, spec Spec, done chan struct{}) {
	defer p.dials.Done()
	defer close(done)
	b := newBound(p.cfg.MaxMessageBytes)
	b.setOnTrip(cancel) // a message too large ends the attempt at once
	s, cmd, tools, err := p.open(ctx, spec, b)
	err = b.explain(err)
	c.mustAcquire()
	defer c.release()
	c.cancelDial()
	c.dialing, c.cancelDial = nil, nil
	if c.forgotten || !c.spec.Version.Equal(spec.Version) {
		if err == nil {
			_ = s.Close()
			killGroup(cmd)
		}
		return
	}
	if err != nil {
		c.backoff = min(max(c.backoff*2, minBackoff), maxBackoff)
		c.err, c.next = err, time.Now().Add(c.backoff)
		p.lg.Warn("mcp server unreachable", "server", spec.Name, "err", err, "retry_in", c.backoff)
		return
	}
	c.session, c.cmd, c.bound, c.tools, c.err, c.backoff = s, cmd, b, tools, nil, 0
	// From now on a message too large drops the session (the SDK may
	// just stop reading a stream, leaving the call to time out).
	b.setOnTrip(func() { go p.drop(c, s, b.err()) })
	go p.watch(c, s)
}

// open connects to spec and lists its tools.
func (p *Pool) open(ctx context.Context, spec Spec, b *bound) (*mcp.ClientSession, *exec.Cmd, []Tool, error) {
	s, cmd, err := p.connect(ctx, spec, b)
	if err != nil {
		return nil, nil, nil, err
	}
	lt, err := s.ListTools(ctx, nil)
	if err != nil {
		_ = s.Close()
		killGroup(cmd)
		return nil, nil, nil, fmt.Errorf("list tools: %w", err)
	}
	tools := make([]Tool, 0, len(lt.Tools))
	for _, t := range lt.Tools {
		schema, _ := json.Marshal(t.InputSchema)
		tools = append(tools, Tool{Name: t.Name, Description: t.Description, InputSchema: schema})
	}
	return s, cmd, tools, nil
}

// watch marks c down when its session ends, so the next use reconnects.
func (p *Pool) watch(c *conn, s *mcp.ClientSession) {
	err := s.Wait()
	c.mustAcquire()
	defer c.release()
	if c.session != s {
		return // closed on purpose
	}
	p.lg.Warn("mcp server connection ended", "server", c.spec.Name, "err", c.bound.explain(err))
	killGroup(c.cmd)
	c.session, c.cmd = nil, nil
	if err == nil {
		err = errors.New("connection closed")
	}
	c.err = c.bound.explain(err)
}

func (p *Pool) connect(ctx context.Context, spec Spec, b *bound) (*mcp.ClientSession, *exec.Cmd, error) {
	var t mcp.Transport
	var cmd *exec.Cmd
	hc := &http.Client{Transport: limitTransport{headers: spec.Headers, b: b}}
	// The SDK's own cap on an SSE event, above ours so that ours speaks
	// first (and stops the drain of what follows).
	maxEvent := 2*b.limit + 64<<10
	switch spec.Transport {
	case Stdio:
		var err error
		if cmd, err = p.stdioCommand(spec); err != nil {
			return nil, nil, err
		}
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		t = &stdioTransport{cmd: cmd, b: b}
	case Streamable:
		t = &mcp.StreamableClientTransport{Endpoint: spec.URL, HTTPClient: hc, MaxRetries: -1, DisableStandaloneSSE: true, MaxEventSize: maxEvent}
	case SSE:
		t = &mcp.SSEClientTransport{Endpoint: spec.URL, HTTPClient: hc, MaxEventSize: maxEvent}
	default:
		return nil, nil, fmt.Errorf("transport %q", spec.Transport)
	}
	s, err := p.client.Connect(ctx, t, nil)
	if err != nil {
		killGroup(cmd)
		return nil, nil, err
	}
	return s, cmd, nil
}

// stdioCommand is spec's server command, in the sandbox, in its
// workspace (created).
func (p *Pool) stdioCommand(spec Spec) (*exec.Cmd, error) {
	if p.sb == nil {
		return nil, fmt.Errorf("%w: none configured", toolexec.ErrNoSandbox)
	}
	if spec.Workspace == "" {
		return nil, errors.New("no workspace for a stdio server")
	}
	ws, err := filepath.Abs(spec.Workspace)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(ws, 0o700); err != nil {
		return nil, err
	}
	bin, err := toolexec.LookPath(spec.Command)
	if err != nil {
		return nil, err
	}
	env := spec.Env
	var shared []string
	if spec.Cache != "" {
		cache, err := filepath.Abs(spec.Cache)
		if err != nil {
			return nil, err
		}
		if err := os.MkdirAll(cache, 0o700); err != nil {
			return nil, err
		}
		env = maps.Clone(env)
		if env == nil {
			env = map[string]string{}
		}
		if _, set := env["npm_config_cache"]; !set {
			env["npm_config_cache"] = cache
		}
		shared = append(shared, cache)
	}
	path, argv, err := p.sb.WrapShared(bin, spec.Args, ws, ws, shared...)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(path, argv...)
	cmd.Dir, cmd.Env = ws, toolexec.Environ(env, ws)
	return cmd, nil
}

func killGroup(cmd *exec.Cmd) {
	if cmd != nil && cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
}

func (p *Pool) closeLocked(c *conn) {
	if c.cancelDial != nil {
		c.cancelDial() // dial sees the change and closes what it opened
	}
	s, cmd := c.session, c.cmd
	c.session, c.cmd, c.tools = nil, nil, nil
	if s != nil {
		_ = s.Close()
	}
	killGroup(cmd)
}

// Forget closes server id's connection (disabled, changed or deleted).
func (p *Pool) Forget(id uuid.UUID) {
	p.mu.Lock()
	c := p.conns[id]
	delete(p.conns, id)
	p.mu.Unlock()
	if c != nil {
		c.mustAcquire()
		c.forgotten = true
		p.closeLocked(c)
		c.release()
	}
}

// Close closes every connection, and waits for the attempts under way
// to end (each is cancelled).
func (p *Pool) Close() {
	defer p.dials.Wait()
	p.mu.Lock()
	ids := make([]uuid.UUID, 0, len(p.conns))
	for id := range p.conns {
		ids = append(ids, id)
	}
	p.mu.Unlock()
	for _, id := range ids {
		p.Forget(id)
	}
}
