package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"time"
)

// The bootstrap admin of the benchmarked gatehouse.
const (
	adminEmail    = "bench-admin@example.com"
	adminPassword = "bench-admin-password"
	userEmail     = "bench-user@example.com"
	userPassword  = "bench-user-password"
	// ServiceName is the proxied service pointing at the stub.
	ServiceName = "bench"
)

// BuildGatehouse builds ./cmd/gatehouse of the module the suite runs in.
func BuildGatehouse(dir string) (string, error) {
	return buildGatehouse("", dir, "gatehouse")
}

// BuildGatehouseAt builds ./cmd/gatehouse as it was at the git revision
// rev of the repository the suite runs in, from a detached worktree under
// dir (removed again once built).
func BuildGatehouseAt(rev, dir string) (string, error) {
	src := filepath.Join(dir, "src")
	if out, err := exec.Command("git", "worktree", "add", "--detach", src, rev).CombinedOutput(); err != nil {
		return "", fmt.Errorf("git worktree add %s: %v\n%s", rev, err, out)
	}
	defer exec.Command("git", "worktree", "remove", "--force", src).Run()
	return buildGatehouse(src, dir, "gatehouse@"+rev)
}

// buildGatehouse builds gatehouse/cmd/gatehouse of the module in src (""
// for the current directory's) into dir; what names it in errors.
func buildGatehouse(src, dir, what string) (string, error) {
	bin := filepath.Join(dir, "gatehouse")
	cmd := exec.Command("go", "build", "-o", bin, "gatehouse/cmd/gatehouse")
	cmd.Dir = src
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build %s: %v\n%s", what, err, out)
	}
	return bin, nil
}

// StartGatehouse starts the real binary with a fresh data dir under dir
// and the WAL, limiter and usage on as in production (fsync included),
// its one service pointing at upstream. It returns the API address.
func StartGatehouse(bin, dir, upstream string) (*Proc, string, error) {
	cfg := map[string]any{
		"data_dir": filepath.Join(dir, "data"),
		"log":      map[string]any{"format": "json", "level": "info"},
		"server":   map[string]any{"host": "127.0.0.1", "port": 0},
		"gateway":  map[string]any{"host": "127.0.0.1", "port": 0},
		"services": map[string]any{ServiceName: map[string]any{"upstream": "http://" + upstream}},
		// The spread-keys cases hold tens of thousands of keys of one user.
		"keys": map[string]any{"max_per_user": map[string]any{"standard": 1_000_000, "premium": 1_000_000}},
	}
	b, _ := json.Marshal(cfg)
	path := filepath.Join(dir, "gatehouse.json")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		return nil, "", err
	}
	env := []string{"GATEHOUSE_ADMIN_EMAIL=" + adminEmail, "GATEHOUSE_ADMIN_PASSWORD=" + adminPassword}
	return StartProc(dir, "gatehouse", []string{bin, "serve", "--config", path}, env, 60*time.Second, func(line string) (string, bool) {
		var l struct{ Msg, Listener, Addr string }
		if json.Unmarshal([]byte(line), &l) == nil && l.Msg == "listening" && l.Listener == "api" {
			return l.Addr, true
		}
		return "", false
	})
}

// apiClient is a logged-in session on gatehouse's management API.
type apiClient struct {
	base string
	hc   *http.Client
}

func login(ctx context.Context, base, email, password string) (*apiClient, error) {
	jar, _ := cookiejar.New(nil)
	c := &apiClient{base: base, hc: &http.Client{Jar: jar, Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 32}}}
	err := c.call(ctx, "POST", "/api/auth/login", map[string]string{"email": email, "password": password}, 200, nil)
	return c, err
}

func (c *apiClient) call(ctx context.Context, method, path string, body any, want int, out any) error {
	b, _ := json.Marshal(body)
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, bytes.NewReader(b))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.hc.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	rb, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		return fmt.Errorf("%s %s = %d %s, want %d", method, path, resp.StatusCode, rb, want)
	}
	if out != nil {
		return json.Unmarshal(rb, out)
	}
	return nil
}

// Provision creates a licensed user with n keys through the API of the
// gatehouse at base (http://host:port), and raises every key's limit as
// the admin (PATCH /api/keys/{id}) so that the limiter never refuses
// during the run. It returns the secrets.
func Provision(ctx context.Context, base string, n int) ([]string, error) {
	admin, err := login(ctx, base, adminEmail, adminPassword)
	if err != nil {
		return nil, err
	}
	err = admin.call(ctx, "POST", "/api/users", map[string]any{
		"email": userEmail, "password": userPassword, "plan": "premium", "licenseActive": true,
	}, 201, nil)
	if err != nil {
		return nil, err
	}
	user, err := login(ctx, base, userEmail, userPassword)
	if err != nil {
		return nil, err
	}
	defer admin.hc.CloseIdleConnections()
	defer user.hc.CloseIdleConnections()
	secrets := make([]string, n)
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	next := make(chan int)
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				var k struct{ ID, Key string }
				err := user.call(ctx, "POST", "/api/keys", map[string]string{"name": fmt.Sprintf("bench-%d", i)}, 201, &k)
				if err == nil {
					err = admin.call(ctx, "PATCH", "/api/keys/"+k.ID, map[string]any{"rateLimit": 1_000_000_000}, 200, nil)
				}
				if err != nil {
					cancel(err)
				}
				secrets[i] = k.Key
			}
		}()
	}
	for i := 0; i < n && ctx.Err() == nil; i++ {
		next <- i
	}
	close(next)
	wg.Wait()
	if err := context.Cause(ctx); err != nil {
		return nil, err
	}
	return secrets, nil
}
