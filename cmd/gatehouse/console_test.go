package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

const consoleDriverDir = "testdata/console"

func atoi(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		return -1 << 30
	}
	return n
}

// TestConsoleInChromium drives the web console in headless Chromium
// (Debian's package, through the pinned puppeteer-core): log in, create a
// key and read it from the page once, use it against validate and the
// proxy (the demo echo service), see the window and the usage chart count
// those requests, rotate, revoke, create a user as admin and view their
// keys, delete, log out. Every page is kept as a screenshot in
// testdata/console/screenshots.
func TestConsoleInChromium(t *testing.T) {
	const hint = "run `make web-test-deps`"
	node, chromium := lookTool(t, "node", hint), lookTool(t, "chromium", hint)
	if _, err := os.Stat(filepath.Join(consoleDriverDir, "node_modules", "puppeteer-core", "package.json")); err != nil {
		skipOrFail(t, "puppeteer-core not installed: "+hint)
	}
	t.Setenv("GATEHOUSE_DEMO_ECHO", "1")
	c := startChild(t, writeConfig(t, t.TempDir(), nil))

	shots, err := filepath.Abs(filepath.Join(consoleDriverDir, "screenshots"))
	if err != nil {
		t.Fatal(err)
	}
	_ = os.RemoveAll(shots)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "console.mjs", chromium, c.api, adminEmail, adminPassword, shots)
	cmd.Dir = consoleDriverDir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("console driver: %v\n%s\nserver:\n%s", err, stderr.String(), c.logs.String())
	}
	var out struct {
		Shots []struct{ Page, File, Text string }
		Facts struct {
			KeyName, KeyID, CSP, ListStatus, StatusAfterRotate, ListStatusRevoked string
			Validate                                                              struct {
				Status int
				Body   struct{ Valid bool }
			}
			Proxy []struct {
				Status           int
				Limit, Remaining string
			}
			WindowUsed, ChartTotal, ChartTotal30, TodayCount string
			AfterRotate, AfterRevoke                         struct{ Old, New int }
			UserPlan, ViewAsTitle, Theirs                    string
			ListedAfterDelete, MeAfterLogout                 int
			CreateWithoutLicense, OldSession                 int
			LimitAfterEdit, UserCreateError, UserUsersPage   string
			UserSeesTheirs, UserHasUsersLink                 int
			Problems                                         []string
		}
	}
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil {
		t.Fatalf("driver output: %v\n%s", err, stdout.String())
	}
	f := out.Facts
	t.Logf("screenshots in %s", shots)

	checks := []struct {
		what string
		ok   bool
		got  any
	}{
		{"the page has the strict CSP", strings.Contains(f.CSP, "script-src 'self'") && !strings.Contains(f.CSP, "unsafe"), f.CSP},
		{"a new key is listed as active", f.ListStatus == "active", f.ListStatus},
		{"the key read from the page validates", f.Validate.Status == 200 && f.Validate.Body.Valid, f.Validate},
		{"three proxied requests pass with rate-limit headers", len(f.Proxy) == 3 && f.Proxy[2].Status == 200 && f.Proxy[2].Limit != "" && atoi(f.Proxy[2].Limit)-atoi(f.Proxy[2].Remaining) == 3, f.Proxy},
		{"the live window counts them", f.WindowUsed == "3", f.WindowUsed},
		{"the chart counts them", f.ChartTotal == "3" && f.ChartTotal30 == "3" && f.TodayCount == "3", []string{f.ChartTotal, f.ChartTotal30, f.TodayCount}},
		{"the admin's new rate limit applies", f.LimitAfterEdit == "5000", f.LimitAfterEdit},
		{"after rotation both keys work, the key in grace", f.AfterRotate.Old == 200 && f.AfterRotate.New == 200 && f.StatusAfterRotate == "grace", []any{f.AfterRotate, f.StatusAfterRotate}},
		{"after revocation neither does", f.AfterRevoke.Old == 401 && f.AfterRevoke.New == 401, f.AfterRevoke},
		{"the list shows it revoked", f.ListStatusRevoked == "revoked", f.ListStatusRevoked},
		{"the admin created a premium user", f.UserPlan == "premium", f.UserPlan},
		{"the admin switched the user's license off", f.OldSession == 401 && f.CreateWithoutLicense == 403, []int{f.OldSession, f.CreateWithoutLicense}},
		{"the admin sees the user's keys", strings.HasPrefix(f.ViewAsTitle, "Keys of user-"), f.ViewAsTitle},
		{"the user sees their key and no Users link", f.UserSeesTheirs == 1 && f.UserHasUsersLink == 0, []int{f.UserSeesTheirs, f.UserHasUsersLink}},
		{"the page shows the API's refusal", strings.Contains(f.UserCreateError, "LICENSE_REQUIRED"), f.UserCreateError},
		{"a user has no Users page", f.UserUsersPage == "Not found", f.UserUsersPage},
		{"the deleted key is gone", f.ListedAfterDelete == 0, f.ListedAfterDelete},
		{"logged out", f.MeAfterLogout == 401, f.MeAfterLogout},
		{"no console error, CSP violation or failed request", len(f.Problems) == 0, f.Problems},
	}
	for _, c := range checks {
		if !c.ok {
			t.Errorf("%s: got %+v", c.what, c.got)
		}
	}

	// A screenshot of each page, non-empty, of a page naming the key.
	wantPages := map[string]string{"login": "Log in", "created": f.KeyName, "key": f.KeyName, "rotated": f.KeyName,
		"revoked": f.KeyName, "users": "Create a user", "user-keys": f.Theirs}
	for _, s := range out.Shots {
		want, ok := wantPages[s.Page]
		if !ok {
			continue
		}
		delete(wantPages, s.Page)
		b, err := os.ReadFile(s.File)
		if err != nil || len(b) < 2048 || !bytes.HasPrefix(b, []byte("\x89PNG\r\n\x1a\n")) {
			t.Errorf("screenshot %s: %d bytes, %v", s.Page, len(b), err)
		}
		if !strings.Contains(s.Text, want) {
			t.Errorf("page %s does not show %q:\n%s", s.Page, want, s.Text)
		}
	}
	for p := range wantPages {
		t.Errorf("no screenshot of %s", p)
	}
	c.stop(t)
}
