package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"time"
)

// gatewayToken is the benchmarked gateway's admin token. The agent cases
// use it only to set up (the provider, the agents, the users' keys); the
// users then call with their own API keys, as clients do.
const gatewayToken = "bench-gateway-token"

// StartGateway starts the real binary with a fresh data dir under dir and
// its agent gateway on a loopback port (WAL with fsync, the gateway's
// per-subject limiter off, as by default). It returns the gateway's
// address and that of its unauthenticated /metrics listener
// (server.metrics_addr), which serves the process's registry (the WAL's
// metrics among them; the gateway's own /metrics does not).
func StartGateway(bin, dir string) (p *Proc, addr, metrics string, err error) {
	p, a, err := startGatewayAddrs(bin, dir)
	return p, a.gateway, a.metrics, err
}

// gatewayAddrs are the listeners of a process StartGateway started.
type gatewayAddrs struct {
	gateway, api, metrics string
}

// startGatewayAddrs is StartGateway, with the key service's listener
// (api) too.
func startGatewayAddrs(bin, dir string) (p *Proc, a gatewayAddrs, err error) {
	cfg := map[string]any{
		"data_dir": filepath.Join(dir, "data"),
		"log":      map[string]any{"format": "json", "level": "info"},
		"server":   map[string]any{"host": "127.0.0.1", "port": 0, "metrics_addr": "127.0.0.1:0"},
		"gateway":  map[string]any{"host": "127.0.0.1", "port": 0, "token": gatewayToken},
	}
	b, _ := json.Marshal(cfg)
	path := filepath.Join(dir, "gatehouse.json")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		return nil, a, err
	}
	env := []string{"GATEHOUSE_ADMIN_EMAIL=" + adminEmail, "GATEHOUSE_ADMIN_PASSWORD=" + adminPassword}
	// Ready once every listener said where it is, in any order.
	p, _, err = StartProc(dir, "gatehouse", []string{bin, "serve", "--config", path}, env, 60*time.Second, func(line string) (string, bool) {
		var l struct{ Msg, Listener, Addr string }
		if json.Unmarshal([]byte(line), &l) != nil || l.Msg != "listening" {
			return "", false
		}
		switch l.Listener {
		case "gateway":
			a.gateway = l.Addr
		case "api":
			a.api = l.Addr
		case "metrics":
			a.metrics = l.Addr
		}
		return a.gateway, a.gateway != "" && a.api != "" && a.metrics != ""
	})
	return p, a, err
}

// gwClient calls the agent gateway with one credential, for one user.
// It is safe for concurrent use.
type gwClient struct {
	base  string // http://host:port
	token string
	user  string // X-Gateway-User-Id, "" for none
	hc    *http.Client
}

// newGWClient returns a client with its own keep-alive pool of up to
// conns connections; every request gives up after timeout.
func newGWClient(addr, token, user string, conns int, timeout time.Duration) *gwClient {
	return &gwClient{base: "http://" + addr, token: token, user: user, hc: &http.Client{
		Timeout:   timeout,
		Transport: &http.Transport{MaxIdleConnsPerHost: conns, MaxConnsPerHost: conns, DisableCompression: true},
	}}
}

// do sends body (JSON, nil for none) and decodes the answer into out
// (when not nil; a *[]byte takes the bytes as they are); an answer other than want is an error naming the
// status, so that the report can show it.
func (c *gwClient) do(ctx context.Context, method, path string, body any, want int, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return err
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.user != "" {
		req.Header.Set("X-Gateway-User-Id", c.user)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	rb, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("%s %s: read: %w", method, path, err)
	}
	if resp.StatusCode != want {
		return fmt.Errorf("%s %s = %d %.200s, want %d", method, path, resp.StatusCode, rb, want)
	}
	if p, ok := out.(*[]byte); ok { // the answer as it is (/metrics)
		*p = rb
		return nil
	}
	if out != nil {
		return json.Unmarshal(rb, out)
	}
	return nil
}

func (c *gwClient) close() { c.hc.CloseIdleConnections() }

// echoProvider is the provider every bench agent runs on: gatehouse's
// built-in echo, which answers "echo: <last message>" without a network
// (here without its default 10 ms pause per word).
const echoProvider = "bench-echo"

// provisionUsers creates the echo provider (once per gateway) and, for
// each user, an agent keyed by the user's name and owned by them, and an
// operator.write API key bound to them. It returns the keys by user.
func provisionUsers(ctx context.Context, addr string, users ...string) (map[string]string, error) {
	admin := newGWClient(addr, gatewayToken, "", 4, 30*time.Second)
	defer admin.close()
	err := admin.do(ctx, "POST", "/v1/providers", map[string]any{
		"name": echoProvider, "provider_type": "echo", "api_key": "sk-echo-unused-1234",
		"settings": map[string]any{"delay_ms": 0}, // no pause per word: the gateway's own time
	}, 201, nil)
	if err != nil {
		return nil, err
	}
	keys := make(map[string]string, len(users))
	for _, u := range users {
		as := newGWClient(addr, gatewayToken, u, 4, 30*time.Second)
		err := as.do(ctx, "POST", "/v1/agents", map[string]any{"agent_key": u, "provider": echoProvider, "model": "echo-1"}, 201, nil)
		var k struct{ Key string }
		if err == nil {
			err = admin.do(ctx, "POST", "/v1/api-keys", map[string]any{"name": "bench-" + u, "scopes": []string{"operator.write"}, "user_id": u}, 201, &k)
		}
		as.close()
		if err != nil {
			return nil, fmt.Errorf("provision user %s: %w", u, err)
		}
		keys[u] = k.Key
	}
	return keys, nil
}

// chatBody is a one-message chat completion with agent (non-streaming).
func chatBody(agent, text string) map[string]any {
	return map[string]any{"model": "agent:" + agent, "messages": []map[string]string{{"role": "user", "content": text}}}
}

// provisionStubAgent creates on the gateway at addr an openai_compat
// provider named provider on the stub at base (.../v1), an agent of user
// (agent_key user, its built-in tools, model stub-1) on it, and user's
// operator.write API key, which it returns (the halves and chat cases).
func provisionStubAgent(ctx context.Context, addr, provider, base, user string) (string, error) {
	admin := newGWClient(addr, gatewayToken, "", 2, 30*time.Second)
	defer admin.close()
	if err := admin.do(ctx, "POST", "/v1/providers", map[string]any{
		"name": provider, "provider_type": "openai_compat", "api_base": base, "api_key": "sk-stub-unused-1234",
	}, 201, nil); err != nil {
		return "", fmt.Errorf("provider: %w", err)
	}
	as := newGWClient(addr, gatewayToken, user, 2, 30*time.Second)
	defer as.close()
	if err := as.do(ctx, "POST", "/v1/agents", map[string]any{"agent_key": user, "provider": provider, "model": "stub-1"}, 201, nil); err != nil {
		return "", fmt.Errorf("agent: %w", err)
	}
	var k struct{ Key string }
	if err := admin.do(ctx, "POST", "/v1/api-keys", map[string]any{"name": "bench-" + user, "scopes": []string{"operator.write"}, "user_id": user}, 201, &k); err != nil {
		return "", fmt.Errorf("api key: %w", err)
	}
	return k.Key, nil
}
