package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fasthttp/websocket"

	"gatehouse/actors/gateway/agentrun/llm/llmtest"
)

const (
	bridgeToken    = "gw-bridge-secret-token-0123456789"
	bridgeUserPass = "user-password-1"
	// defaultBudgetTokens is the bridge world's default user budget: a
	// month of that many tokens.
	defaultBudgetTokens = 5_000_000
)

// bridgeWorld is a real server with a gateway token, an echo provider
// (streaming word by word; its model echo-1 priced, so runs cost
// something), an MCP server that cannot be reached, a default user budget
// (a month of echoPriceTokens tokens), and two console users besides the
// admin: alice and bob.
type bridgeWorld struct {
	c                 *child
	admin, alice, bob *client
	aliceID, bobID    string
	mcpID             string
}

func newBridgeWorld(t *testing.T) *bridgeWorld {
	t.Helper()
	cfg := writeConfig(t, t.TempDir(), map[string]any{
		"gateway": map[string]any{"host": "127.0.0.1", "port": 0, "token": bridgeToken,
			"default_user_budget": map[string]any{"period": "month", "max_tokens": defaultBudgetTokens}},
	})
	w := &bridgeWorld{c: startChild(t, cfg)}
	w.admin = newClient(w.c.api)
	w.admin.login(t, adminEmail, adminPassword)
	for _, u := range []struct {
		email string
		id    *string
		cl    **client
	}{{"alice@example.com", &w.aliceID, &w.alice}, {"bob@example.com", &w.bobID, &w.bob}} {
		var created struct{ ID string }
		expect(t, "create "+u.email, 201)(w.admin.do("POST", "/api/users", map[string]any{
			"email": u.email, "password": bridgeUserPass, "plan": "standard", "licenseActive": true,
		}, nil, &created))
		*u.id = created.ID
		*u.cl = newClientLoggedIn(t, w.c.api, u.email, bridgeUserPass)
	}
	expect(t, "create provider", 201)(w.admin.do("POST", "/api/gateway/v1/providers", map[string]any{
		"name": "echo", "provider_type": "echo", "settings": map[string]any{"delay_ms": 120,
			"prices": map[string]any{"echo-1": map[string]any{"input": 100, "output": 200}}},
	}, nil, nil))
	var srv struct{ ID string }
	expect(t, "register MCP server", 201)(w.admin.do("POST", "/api/gateway/v1/mcp/servers", map[string]any{
		"name": "tools", "transport": "streamable-http", "url": "http://127.0.0.1:9/mcp",
	}, nil, &srv))
	w.mcpID = srv.ID
	return w
}

// TestConsoleGatewayInChromium drives the console's gateway pages in
// headless Chromium (Debian's package, through the pinned
// puppeteer-core): a user creates an agent, edits its prompt, chats with
// it and sees the answer streamed word by word (the echo provider), finds
// the session's history again, opens the run's trace and sees its spans
// (a tool call's too), sees their usage move, and asks for an MCP server;
// an admin sees the
// server's connection state, approves the request, finds the review in
// the activity log, sees the user's trace and makes a gateway API key.
// Every page is kept as a screenshot in testdata/console/gateway-screenshots
// (git-ignored; TestConsoleInChromium empties testdata/console/screenshots).
func TestConsoleGatewayInChromium(t *testing.T) {
	const hint = "run `make web-test-deps`"
	node, chromium := lookTool(t, "node", hint), lookTool(t, "chromium", hint)
	if _, err := os.Stat(filepath.Join(consoleDriverDir, "node_modules", "puppeteer-core", "package.json")); err != nil {
		skipOrFail(t, "puppeteer-core not installed: "+hint)
	}
	w := newBridgeWorld(t)
	// Alice's day budget, set through the API: the usage page shows it.
	var aliceBudget struct {
		ID string
	}
	expect(t, "alice's day budget", 201)(w.admin.do("POST", "/api/gateway/v1/budgets", map[string]any{
		"subject": map[string]any{"type": "user", "id": w.aliceID}, "period": "day", "max_usd": 5, "max_tokens": 200000,
	}, nil, &aliceBudget))
	// A provider whose model has no price (an OpenAI-compatible stub on
	// loopback): its calls cost $0, flagged as unpriced.
	mystery := llmtest.NewOpenAI(t)
	expect(t, "create the unpriced provider", 201)(w.admin.do("POST", "/api/gateway/v1/providers", map[string]any{
		"name": "mystery", "provider_type": "openai_compat", "api_base": mystery.Base(), "api_key": "sk-mystery-console-0001",
	}, nil, nil))
	stubURL, unexpected := keyStateStub(t)
	shots, err := filepath.Abs(filepath.Join(consoleDriverDir, "gateway-screenshots"))
	if err != nil {
		t.Fatal(err)
	}
	_ = os.RemoveAll(shots)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "gateway.mjs", chromium, w.c.api, "alice@example.com", bridgeUserPass,
		adminEmail, adminPassword, w.mcpID, shots, w.bobID, stubURL)
	cmd.Dir = consoleDriverDir
	cmd.Env = append(os.Environ(), "GATEWAY_TOKEN="+bridgeToken)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("console driver: %v\n%s\nserver:\n%s", err, stderr.String(), w.c.logs.String())
	}
	var out struct {
		Shots []struct{ Page, File, Text string }
		Facts struct {
			AgentKey, AgentID, Message, GatewayUser, Session, Shared string
			Answer, Meta, TraceTokens                                string
			Streamed, History                                        []string
			Spans, ToolSpans                                         []struct{ Type, Label string }
			RunsBefore, RunsAfter, ChartTotal, TokensIn              string
			TokensOut, McpState, ApprovedRow, Activity, GwKey        string
			PatToken, PatRow                                         string
			Listed, UserHasGatewayAdmin, SessionRows, Charts         int
			AdminTraces, Bodies, TokenInBodies, UserTraces           int
			AdminSeesAll                                             int
			Request                                                  struct{ ID, Status string }
			Problems                                                 []string
			// The providers pages, the headings, the fallbacks.
			SpanCall                                             string
			TypeFields                                           map[string]typeForm
			TypeOptions, ProviderKeys, KeyStates, KeyStatesAfter []string
			ProviderRow, ProviderHeading, Verify                 string
			ProviderSettings, Models                             string
			Headings                                             []adminHeading
			Fallbacks, MaxTokens, FallbackAnswer                 string
			FallbackRows, Attempts                               []string
			ProviderKeyInBodies, PastedInputs, StubInputs        int
			StubVerdicts, StubStates                             []string
			StubLastError, StubModels                            string
			// Budgets and cost.
			BudgetsBefore, BudgetsAfter, AdminBudgets []budgetCard
			ChatCost, TraceCost, SessionCost          string
			SpanCosts, TraceListCosts, CostRows       []string
			UsageCost                                 struct {
				Text  string
				Value float64
			}
			CostCharts, UserSeesAllBudgets, RefusedAnswers int
			CostByAgent, CostByModel, SpentTokens          float64
			FallbackID, KeyID                              string
			BudgetPreset                                   struct {
				Type, Agent string
				AgentShown  bool
			}
			KeyPreset                                struct{ Type, Key string }
			AgentBudgetRow, BudgetDuplicate, Refusal string
			EditTitle, EditedRow, WithinBudget       string
			WithinBudgetMeta, KeyBudgetRow           string
			EditDisabled                             bool
			AllBudgetRows                            []struct{ Type, ID, Text string }
			BudgetRowsAfterDelete                    []string
			UnpricedAnswer, UnpricedTraceCost        string
			UnpricedNote, UnpricedCalls              string
			UnpricedSpanCosts                        []string
		}
	}
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil {
		t.Fatalf("driver output: %v\n%s", err, stdout.String())
	}
	f := out.Facts
	t.Logf("screenshots in %s", shots)
	wantAnswer := "echo: " + f.Message
	checks := []struct {
		what string
		ok   bool
		got  any
	}{
		{"the user has no gateway admin link", f.UserHasGatewayAdmin == 0, f.UserHasGatewayAdmin},
		{"the page names the user's gateway id: their console id", f.GatewayUser == w.aliceID, f.GatewayUser},
		{"the new agent is listed", f.Listed == 1, f.Listed},
		{"it is shared with bob as operator", strings.Contains(f.Shared, w.bobID) && strings.Contains(f.Shared, "operator"), f.Shared},
		{"the answer is the echo's", f.Answer == wantAnswer, f.Answer},
		{"the answer streamed in, word by word", len(f.Streamed) >= 4 && f.Streamed[len(f.Streamed)-1] == wantAnswer && len(f.Streamed[0]) < len(wantAnswer), f.Streamed},
		{"the answer shows its tokens", strings.Contains(f.Meta, "in") && strings.Contains(f.Meta, "out"), f.Meta},
		{"the session's history comes back", len(f.History) == 2 && f.History[0] == "user: "+f.Message && f.History[1] == "assistant: "+wantAnswer, f.History},
		{"the trace has its LLM span, labelled with duration and tokens", len(f.Spans) >= 1 && f.Spans[0].Type == "llm" && strings.Contains(f.Spans[0].Label, "ms") && strings.Contains(f.Spans[0].Label, " in / "), f.Spans},
		{"a tool call's trace: LLM call, tool, LLM call", len(f.ToolSpans) == 3 && f.ToolSpans[0].Type == "llm" && f.ToolSpans[1].Type == "tool" &&
			strings.Contains(f.ToolSpans[1].Label, "memory_save · ") && f.ToolSpans[2].Type == "llm", f.ToolSpans},
		{"the user's traces list both runs", f.UserTraces == 2, f.UserTraces},
		{"the trace counts tokens", strings.Contains(f.TraceTokens, " in, ") && !strings.HasPrefix(f.TraceTokens, "0 in"), f.TraceTokens},
		{"usage was empty before", f.RunsBefore == "0", f.RunsBefore},
		{"usage moved", f.RunsAfter == "2" && f.ChartTotal != "0" && f.ChartTotal != "" && f.TokensIn != "0" && f.TokensOut != "0", []string{f.RunsAfter, f.ChartTotal, f.TokensIn, f.TokensOut}},
		{"two usage charts are drawn", f.Charts == 2, f.Charts},
		{"the session is listed", f.SessionRows == 1, f.SessionRows},
		{"the user's request is pending", f.Request.ID != "" && f.Request.Status == "pending", f.Request},
		{"the MCP server shows it is not connected", strings.Contains(f.McpState, "not connected"), f.McpState},
		{"the request is approved", strings.Contains(f.ApprovedRow, "approved"), f.ApprovedRow},
		{"the activity log shows the review", strings.Contains(f.Activity, "mcp_request.review") && strings.Contains(f.Activity, "console"), f.Activity},
		{"the admin sees the user's traces (two) and their own (the fallback's, the turn over budget, the one within, the unpriced one)", f.AdminTraces == 6, f.AdminTraces},
		{"the admin's every-user view lists the user's agent", f.AdminSeesAll == 1, f.AdminSeesAll},
		{"the gateway API key is shown once", strings.HasPrefix(f.GwKey, "gateway_"), f.GwKey},
		{"a management token is shown once", strings.HasPrefix(f.PatToken, "svc_pat_") && len(f.PatToken) == len("svc_pat_")+32, len(f.PatToken)},
		{"the token is listed with its scope", strings.Contains(f.PatRow, "ci") && strings.Contains(f.PatRow, "write") && !strings.Contains(f.PatRow, "svc_pat_"), f.PatRow},
		{"no gateway token reached the browser", f.Bodies > 20 && f.TokenInBodies == 0, []int{f.Bodies, f.TokenInBodies}},
		{"no console error, CSP violation or failed request", len(f.Problems) == 0, f.Problems},
		{"a trace's LLM span names the provider and model that answered", strings.Contains(f.SpanCall, "echo / echo-1"), f.SpanCall},
		{"the type select lists every provider type", slices.Equal(f.TypeOptions, []string{"anthropic_native", "gemini_native", "azure_openai",
			"bedrock", "ollama", "openai_compat", "openai", "openrouter", "groq", "deepseek", "mistral", "xai", "echo"}), f.TypeOptions},
		{"bedrock asks for a region and AWS credentials, api_base optional",
			hasAll(f.TypeFields["bedrock"].Fields, "AWS region", "AWS credentials", "Max retries") && !f.TypeFields["bedrock"].BaseRequired, f.TypeFields["bedrock"]},
		{"azure asks for its endpoint, an API version and deployments",
			hasAll(f.TypeFields["azure_openai"].Fields, "API base", "API version", "Deployments", "API key") && f.TypeFields["azure_openai"].BaseRequired, f.TypeFields["azure_openai"]},
		{"anthropic has a thinking budget and prompt caching, and a default base",
			hasAll(f.TypeFields["anthropic_native"].Fields, "Thinking budget (tokens)", "Prompt caching", "Max tokens") && !f.TypeFields["anthropic_native"].BaseRequired &&
				f.TypeFields["anthropic_native"].BasePlaceholder == "default: api.anthropic.com" && !hasAll(f.TypeFields["anthropic_native"].Fields, "AWS region"), f.TypeFields["anthropic_native"]},
		{"gemini has a thinking budget and no prompt caching switch",
			hasAll(f.TypeFields["gemini_native"].Fields, "Thinking budget (tokens)") && !hasAll(f.TypeFields["gemini_native"].Fields, "Prompt caching"), f.TypeFields["gemini_native"]},
		{"ollama defaults to the local server and has a context window", f.TypeFields["ollama"].BasePlaceholder == "default: 127.0.0.1:11434" &&
			!f.TypeFields["ollama"].BaseRequired && hasAll(f.TypeFields["ollama"].Fields, "Context window (num_ctx)"), f.TypeFields["ollama"]},
		{"openai_compat needs its base; keys are password inputs", f.TypeFields["openai_compat"].BaseRequired && f.TypeFields["openai_compat"].KeyType == "password", f.TypeFields["openai_compat"]},
		{"two keys pasted at once fill two inputs", f.PastedInputs == 2, f.PastedInputs},
		{"the provider's three keys are listed masked", slices.Equal(f.ProviderKeys, []string{"****1111", "****2222", "****3333"}) && !strings.Contains(f.ProviderRow, "sk-ant"), []any{f.ProviderKeys, f.ProviderRow}},
		{"the provider's page names it and shows each key's state", strings.Contains(f.ProviderHeading, "claude") && len(f.KeyStates) == 3 &&
			strings.Contains(f.KeyStates[0], "****1111") && strings.Contains(f.KeyStates[0], "ready") &&
			strings.Contains(f.KeyStates[1], "****2222") && strings.Contains(f.KeyStates[2], "****3333"), []any{f.ProviderHeading, f.KeyStates}},
		{"three keys pasted into the key field: the key and two more", f.StubInputs == 2, f.StubInputs},
		{"verify shows the refused key's error and, once past it, ok", slices.ContainsFunc(f.StubVerdicts, func(v string) bool {
			return strings.HasPrefix(v, "failed") && strings.Contains(v, "401")
		}) && slices.ContainsFunc(f.StubVerdicts, func(v string) bool { return strings.HasPrefix(v, "ok in ") }), f.StubVerdicts},
		{"each key shows its state, masked", len(f.StubStates) == 3 &&
			strings.Contains(f.StubStates[0], "****0001") && strings.Contains(f.StubStates[0], "rejected") && strings.Contains(f.StubStates[0], "401") &&
			strings.Contains(f.StubStates[1], "****0002") && strings.Contains(f.StubStates[1], "cooling down until") &&
			strings.Contains(f.StubStates[2], "****0003") && strings.Contains(f.StubStates[2], "ready") &&
			!strings.Contains(strings.Join(f.StubStates, " "), "sk-stub"), f.StubStates},
		{"the provider's last error is shown", f.StubLastError != "none" && f.StubLastError != "", f.StubLastError},
		{"the stub's models are listed", strings.Contains(f.StubModels, "stub-model"), f.StubModels},
		{"the stub got only what the gateway should send", len(unexpected()) == 0, unexpected()},
		{"removing the pool keeps api_key only", len(f.KeyStatesAfter) == 1 && strings.Contains(f.KeyStatesAfter[0], "****1111"), f.KeyStatesAfter},
		{"the provider's settings were edited", strings.Contains(f.ProviderSettings, `"thinking_budget_tokens":4096`) && strings.Contains(f.ProviderSettings, `"prompt_caching":false`), f.ProviderSettings},
		{"verify shows ok and the latency", strings.HasPrefix(f.Verify, "ok in "), f.Verify},
		{"the models button lists the provider's models", f.Models != "" && !strings.Contains(f.Models, "Asking"), f.Models},
		{"no provider key reached the browser", f.ProviderKeyInBodies == 0, f.ProviderKeyInBodies},
		{"the fallback was saved, with max tokens", f.Fallbacks == "echo / echo-1" &&
			slices.Equal(f.FallbackRows, []string{"echo / echo-1"}) && f.MaxTokens == "1024", []any{f.Fallbacks, f.FallbackRows, f.MaxTokens}},
		{"the fallback answered for the dead provider", f.FallbackAnswer == "echo: who answers", f.FallbackAnswer},
		{"the trace shows both attempts: the dead provider's failure, then echo", len(f.Attempts) == 2 &&
			strings.Contains(f.Attempts[0], "dead / gpt-4o-mini (openai_compat) · attempt 1") && strings.Contains(f.Attempts[0], "failed") &&
			strings.Contains(f.Attempts[1], "echo / echo-1 (echo) · attempt 2") && strings.Contains(f.Attempts[1], "ok"), f.Attempts},
		{"every admin page was visited", len(f.Headings) == 7, f.Headings},
	}
	checks = append(checks, budgetChecks(t, w, aliceBudget.ID, f.BudgetsBefore, f.BudgetsAfter, f.UsageCost.Value)...)
	checks = append(checks, []struct {
		what string
		ok   bool
		got  any
	}{
		{"a chat answer says what its budgets leave", strings.Contains(f.Meta, "budget left $") && strings.Contains(f.Meta, "tokens"), f.Meta},
		{"the chat page shows the session's cost", strings.Contains(f.ChatCost, "cost $") && strings.Contains(f.ChatCost, "over 1 run") && dollars(f.ChatCost) > 0, f.ChatCost},
		{"the trace shows the run's cost", strings.HasPrefix(f.TraceCost, "$") && dollars(f.TraceCost) > 0 && !strings.Contains(f.TraceCost, "unpriced"), f.TraceCost},
		{"each LLM span shows its cost", len(f.SpanCosts) >= 1 && !slices.ContainsFunc(f.SpanCosts, func(c string) bool { return !strings.HasPrefix(c, "$") || dollars(c) <= 0 }), f.SpanCosts},
		{"the traces list shows each run's cost", len(f.TraceListCosts) == 2 && !slices.ContainsFunc(f.TraceListCosts, func(c string) bool { return !strings.HasPrefix(c, "$") || dollars(c) <= 0 }), f.TraceListCosts},
		{"the sessions list shows the session's cost, whole", strings.HasPrefix(f.SessionCost, "$") && dollars(f.SessionCost) > 0, f.SessionCost},
		{"the usage page's cost per day: two charts, by agent and by model, adding up", f.CostCharts == 2 && f.UsageCost.Value > 0 &&
			near(f.CostByAgent, f.UsageCost.Value) && near(f.CostByModel, f.UsageCost.Value) && strings.HasPrefix(f.UsageCost.Text, "$"), []any{f.CostCharts, f.CostByAgent, f.CostByModel, f.UsageCost}},
		{"the cost tables name the agent and the model", slices.ContainsFunc(f.CostRows, func(r string) bool { return strings.Contains(r, f.AgentKey) }) &&
			slices.ContainsFunc(f.CostRows, func(r string) bool { return strings.Contains(r, "echo-1") }), f.CostRows},
		{"a user sees no table of every budget", f.UserSeesAllBudgets == 0, f.UserSeesAllBudgets},
		{"the agent page's link picks the agent in the budgets form", f.BudgetPreset.Type == "agent" && f.BudgetPreset.Agent == f.FallbackID && f.FallbackID != "" && f.BudgetPreset.AgentShown, f.BudgetPreset},
		{"the agent's budget is listed", strings.Contains(f.AgentBudgetRow, "fallback-") && strings.Contains(f.AgentBudgetRow, "day") && strings.Contains(f.AgentBudgetRow, "0 / 10"), f.AgentBudgetRow},
		{"a second budget of the same subject and period shows the API's refusal", strings.Contains(f.BudgetDuplicate, "ALREADY_EXISTS"), f.BudgetDuplicate},
		{"a turn over the budget shows the refusal, and no empty answer", strings.Contains(f.Refusal, "RESOURCE_EXHAUSTED") && strings.Contains(f.Refusal, "quota reached") && f.RefusedAnswers == 0, []any{f.Refusal, f.RefusedAnswers}},
		{"the form edits the budget; its subject stays", strings.HasPrefix(f.EditTitle, "Edit the day budget of agent fallback-") && f.EditDisabled && strings.Contains(f.EditedRow, "/ 100,000"), []any{f.EditTitle, f.EditDisabled, f.EditedRow}},
		{"raised, the budget lets the turn run and shows its spend", f.WithinBudget == "echo: within budget" && strings.Contains(f.WithinBudgetMeta, "budget left") && f.SpentTokens > 0, []any{f.WithinBudget, f.WithinBudgetMeta, f.SpentTokens}},
		{"the API key's link picks the key in the budgets form", f.KeyPreset.Type == "api_key" && f.KeyPreset.Key == f.KeyID && f.KeyID != "", f.KeyPreset},
		{"the key's budget is listed", strings.Contains(f.KeyBudgetRow, "console-e2e") && strings.Contains(f.KeyBudgetRow, "total") && strings.Contains(f.KeyBudgetRow, "$0.00 / $1.00") && strings.Contains(f.KeyBudgetRow, "never"), f.KeyBudgetRow},
		{"the admin's budgets: the default user one with its spend, their agent's and their key's", len(f.AdminBudgets) == 3 &&
			slices.ContainsFunc(f.AdminBudgets, func(b budgetCard) bool {
				return b.IsDefault && b.Type == "user" && b.Period == "month" && len(b.Caps) == 1 && b.Caps[0].Cap == "tokens" &&
					b.Caps[0].Max == defaultBudgetTokens && b.Caps[0].Spent > 0 && strings.Contains(b.Title, "default")
			}) &&
			slices.ContainsFunc(f.AdminBudgets, func(b budgetCard) bool { return b.Type == "agent" && b.Caps[0].Max == 100000 && b.Caps[0].Spent > 0 }) &&
			slices.ContainsFunc(f.AdminBudgets, func(b budgetCard) bool {
				return b.Type == "api_key" && b.Resets == "never resets" && b.Caps[0].Cap == "usd"
			}), f.AdminBudgets},
		{"the admin sees every budget: alice's, the agent's, the key's", slices.ContainsFunc(f.AllBudgetRows, func(r struct{ Type, ID, Text string }) bool {
			return r.Type == "user" && r.ID == w.aliceID && strings.Contains(r.Text, "alice@example.com")
		}) && slices.ContainsFunc(f.AllBudgetRows, func(r struct{ Type, ID, Text string }) bool { return r.Type == "agent" && r.ID == f.FallbackID }) &&
			slices.ContainsFunc(f.AllBudgetRows, func(r struct{ Type, ID, Text string }) bool { return r.Type == "api_key" && r.ID == f.KeyID }), f.AllBudgetRows},
		{"a model without a price: the run answers, and its trace and span say unpriced", f.UnpricedAnswer == "stub: what costs nothing" &&
			strings.Contains(f.UnpricedTraceCost, "$0.00 · unpriced") && strings.Contains(f.UnpricedTraceCost, "has no price") &&
			len(f.UnpricedSpanCosts) == 1 && f.UnpricedSpanCosts[0] == "$0.00 · unpriced", []any{f.UnpricedAnswer, f.UnpricedTraceCost, f.UnpricedSpanCosts}},
		{"the usage page flags the unpriced call and names its model", f.UnpricedCalls == "1" && strings.Contains(f.UnpricedNote, "1 call to models without a price") &&
			strings.Contains(f.UnpricedNote, "mystery-model-1 (1)"), []any{f.UnpricedCalls, f.UnpricedNote}},
		{"the key's budget is deleted", !slices.Contains(f.BudgetRowsAfterDelete, "api_key") && slices.Contains(f.BudgetRowsAfterDelete, "agent"), f.BudgetRowsAfterDelete},
	}...)
	for _, hd := range f.Headings {
		if hd.ID != "admin-heading" || hd.H2 == "" || !strings.HasPrefix(hd.Title, hd.H2+" · ") {
			t.Errorf("admin page %s: first heading %q (id %q), title %q; want its own h2 that the title repeats", hd.Tab, hd.H2, hd.ID, hd.Title)
		}
		if len(hd.Unlabelled) > 0 {
			t.Errorf("admin page %s: inputs without a label: %v", hd.Tab, hd.Unlabelled)
		}
	}
	for _, c := range checks {
		if !c.ok {
			t.Errorf("%s: got %+v", c.what, c.got)
		}
	}
	// The token the page showed drives the key service on its own, and is
	// refused on the gateway bridge (which takes the session only).
	if strings.HasPrefix(f.PatToken, "svc_pat_") {
		pat := map[string]string{"Authorization": "Bearer " + f.PatToken}
		var keys struct {
			Keys []any `json:"keys"`
		}
		expect(t, "GET /api/keys with the page's token", 200)(newClient(w.c.api).do("GET", "/api/keys", nil, pat, &keys))
		expect(t, "the bridge with a token", 401)(newClient(w.c.api).do("GET", "/api/gateway/v1/agents", nil, pat, nil))
	}
	// The console's agents are the gateway's for X-Gateway-User-Id: <console id>.
	gc := newClient(w.c.gateway)
	var agents struct {
		Data []struct {
			AgentKey string `json:"agent_key"`
		}
	}
	expect(t, "gateway agents of alice", 200)(gc.do("GET", "/v1/agents", nil,
		map[string]string{"Authorization": "Bearer " + bridgeToken, "X-Gateway-User-Id": w.aliceID}, &agents))
	if len(agents.Data) != 1 || agents.Data[0].AgentKey != f.AgentKey {
		t.Errorf("GET /v1/agents for alice's id = %+v, want %s", agents, f.AgentKey)
	}
	// ... and bob, whom she shared it with, finds it in his console.
	var bobs struct {
		Data []struct {
			AgentKey string `json:"agent_key"`
		}
	}
	expect(t, "bob's agents through the bridge", 200)(w.bob.do("GET", "/api/gateway/v1/agents", nil, nil, &bobs))
	if len(bobs.Data) != 1 || bobs.Data[0].AgentKey != f.AgentKey {
		t.Errorf("bob's agents = %+v, want %s", bobs, f.AgentKey)
	}

	wantPages := map[string]string{"agent": f.AgentKey, "agents": f.AgentKey, "chat": wantAnswer, "trace": "Spans", "trace-tool": "memory_save",
		"usage": "Tokens in", "sessions": f.Session, "providers": "echo", "mcp": "not connected", "requests": "alice@example.com",
		"activity": "mcp_request.review", "api-keys": "console-e2e", "mcp-request": "the browser test needs it", "tokens": "Access tokens",
		"provider": "Saved.", "provider-echo": "Verify", "agent-fallbacks": "echo / echo-1", "trace-fallback": "attempt 2", "provider-stub": "stub-model",
		"budgets": "ALREADY_EXISTS", "chat-refused": "quota reached", "usage-admin": "Every budget", "trace-unpriced": "unpriced"}
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
	w.c.stop(t)
}

// Keys of the provider keyStateStub answers for: the first refused, the
// second rate limited, the third good.
const (
	stubKeyRevoked = "sk-stub-console-revoked-0001"
	stubKeyLimited = "sk-stub-console-limited-0002"
	stubKeyGood    = "sk-stub-console-good-0003"
)

// keyStateStub serves OpenAI's GET /v1/models, as its API reference
// documents it, on loopback, for the provider whose key states the
// browser test watches: 401 for stubKeyRevoked, 429 with Retry-After: 120
// for stubKeyLimited, the list for stubKeyGood. unexpected lists what it
// got that the gateway should not send (another path or method, another
// or no key).
func keyStateStub(t *testing.T) (url string, unexpected func() []string) {
	t.Helper()
	var mu sync.Mutex
	var bad []string
	fail := func(w http.ResponseWriter, status int, typ, msg string) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"message": msg, "type": typ, "param": nil, "code": nil}})
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth := r.Header.Get("Authorization")
		if r.Method != http.MethodGet || r.URL.Path != "/v1/models" || !strings.HasPrefix(auth, "Bearer sk-stub-console-") {
			mu.Lock()
			bad = append(bad, r.Method+" "+r.URL.Path+" with "+strings.SplitN(auth, " ", 2)[0])
			mu.Unlock()
			fail(w, http.StatusNotFound, "invalid_request_error", "unexpected request")
			return
		}
		switch strings.TrimPrefix(auth, "Bearer ") {
		case stubKeyRevoked:
			fail(w, http.StatusUnauthorized, "invalid_request_error", "Incorrect API key provided")
		case stubKeyLimited:
			w.Header().Set("Retry-After", "120")
			fail(w, http.StatusTooManyRequests, "requests", "Rate limit reached for requests")
		case stubKeyGood:
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"object":"list","data":[{"id":"stub-model","object":"model","created":1700000000,"owned_by":"stub"}]}`)
		default:
			fail(w, http.StatusUnauthorized, "invalid_request_error", "Incorrect API key provided")
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(bad)
	}
}

// budgetCard is a budget's bars on the usage page: its subject type,
// period, whether it is the configured default, and each capped
// amount's numbers, as data and as the page reads.
type budgetCard struct {
	Type, Period, Title, Resets string
	IsDefault                   bool
	Caps                        []struct {
		Cap, Text, Bar               string
		Spent, Reserved, Max, Filled float64
	}
}

// dollars reads the first amount of USD in s ("… $0.0123 …"); -1 if none.
func dollars(s string) float64 {
	m := regexp.MustCompile(`\$([0-9][0-9,]*(?:\.[0-9]+)?)`).FindStringSubmatch(s)
	if m == nil {
		return -1
	}
	v, err := strconv.ParseFloat(strings.ReplaceAll(m[1], ",", ""), 64)
	if err != nil {
		return -1
	}
	return v
}

// near reports whether two amounts of USD agree to the nano-USD's
// rounding (the API sums nano-USD; the page sums floats).
func near(a, b float64) bool { return math.Abs(a-b) < 1e-6 }

// budgetChecks are the checks of alice's day budget ($5, 200,000
// tokens) on her usage page, before her runs and after them, against what
// the API says it has spent (GET /v1/budgets/{id}) and what her runs
// cost (GET /v1/traces); usageCost is the page's 30-day cost.
func budgetChecks(t *testing.T, w *bridgeWorld, id string, before, after []budgetCard, usageCost float64) []struct {
	what string
	ok   bool
	got  any
} {
	t.Helper()
	var b struct {
		SpentUSD    float64 `json:"spent_usd"`
		SpentTokens float64 `json:"spent_tokens"`
	}
	expect(t, "alice's budget", 200)(w.admin.do("GET", "/api/gateway/v1/budgets/"+id, nil, nil, &b))
	var runs struct {
		Data []struct {
			CostUSD float64 `json:"cost_usd"`
		}
	}
	expect(t, "alice's runs", 200)(w.admin.do("GET", "/api/gateway/v1/traces?user_id="+w.aliceID, nil, nil, &runs))
	var cost float64
	for _, r := range runs.Data {
		cost += r.CostUSD
	}
	caps := func(cs []budgetCard) map[string]float64 {
		m := map[string]float64{}
		if len(cs) == 1 {
			for _, c := range cs[0].Caps {
				m[c.Cap+".spent"], m[c.Cap+".max"], m[c.Cap+".filled"] = c.Spent, c.Max, c.Filled
			}
		}
		return m
	}
	pre, post := caps(before), caps(after)
	one := func(cs []budgetCard) bool {
		return len(cs) == 1 && cs[0].Type == "user" && cs[0].Period == "day" && !cs[0].IsDefault &&
			strings.Contains(cs[0].Title, "Daily budget of user me") && strings.HasPrefix(cs[0].Resets, "resets ")
	}
	text := func(cs []budgetCard, cp string) string {
		for _, c := range cs[0].Caps {
			if c.Cap == cp {
				return c.Text + " | " + c.Bar
			}
		}
		return ""
	}
	return []struct {
		what string
		ok   bool
		got  any
	}{
		{"before her runs, alice's usage page shows her day budget, nothing spent", one(before) && len(before[0].Caps) == 2 &&
			pre["usd.max"] == 5 && pre["usd.spent"] == 0 && pre["tokens.max"] == 200000 && pre["tokens.spent"] == 0 && pre["usd.filled"] == 0, before},
		{"after them, its bars show what the API says is spent", one(after) && b.SpentUSD > 0 && post["usd.spent"] == b.SpentUSD &&
			post["tokens.spent"] == b.SpentTokens && post["usd.filled"] > 0 && post["tokens.filled"] > 0, []any{after, b}},
		{"the spend is her runs' cost, and her usage's", near(b.SpentUSD, cost) && near(usageCost, cost), []any{b.SpentUSD, cost, usageCost}},
		{"the bars read as spent of max", len(after) == 1 && strings.Contains(text(after, "usd"), "of $5.00 spent") &&
			strings.Contains(text(after, "tokens"), "of 200,000 spent"), after},
	}
}

// typeForm is what the providers page's create form shows for one type.
type typeForm struct {
	Fields                   []string
	BaseRequired             bool
	BasePlaceholder, KeyType string
}

// adminHeading is a gateway admin page's first heading, its document
// title, and its inputs that have no label.
type adminHeading struct {
	Tab, H2, ID, Title string
	Unlabelled         []string
}

// hasAll reports whether every one of want is in got.
func hasAll(got []string, want ...string) bool {
	for _, w := range want {
		if !slices.Contains(got, w) {
			return false
		}
	}
	return true
}

// TestGatewayBridge checks the console's bridge to the gateway over real
// HTTP: the session and the CSRF rule guard it, a user sees only their
// own agents and traces, an admin sees everyone's, the activity log names
// the console user, the WebSocket RPC runs a session turn with the
// session's cookie (and refuses another origin or no session), and no
// answer carries the gateway token.
func TestGatewayBridge(t *testing.T) {
	w := newBridgeWorld(t)
	var bodies []string
	record := func(cl *client, method, path string, body any, hdr map[string]string) (int, string) {
		t.Helper()
		var rd io.Reader
		if body != nil {
			b, _ := json.Marshal(body)
			rd = bytes.NewReader(b)
		}
		req, err := http.NewRequest(method, cl.base+path, rd)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := cl.hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		bodies = append(bodies, string(b))
		return resp.StatusCode, string(b)
	}
	must := func(what string, want int) func(int, string) string {
		return func(got int, body string) string {
			t.Helper()
			if got != want {
				t.Fatalf("%s = %d %s; want %d", what, got, body, want)
			}
			return body
		}
	}
	// Each user makes an agent and runs it once.
	for _, u := range []struct {
		cl  *client
		key string
	}{{w.alice, "alice-agent"}, {w.bob, "bob-agent"}} {
		must("create "+u.key, 201)(record(u.cl, "POST", "/api/gateway/v1/agents", map[string]any{"agent_key": u.key, "provider": "echo", "model": "m"}, nil))
		must("run "+u.key, 200)(record(u.cl, "POST", "/api/gateway/v1/agents/"+u.key+"/wake", map[string]any{"message": "hi"}, nil))
	}

	tests := []struct {
		name   string
		cl     *client
		method string
		path   string
		body   any
		hdr    map[string]string
		want   int
		has    []string
		hasNot []string
	}{
		{"no session", newClient(w.c.api), "GET", "/api/gateway/v1/agents", nil, nil, 401, []string{`"UNAUTHORIZED"`}, nil},
		{"a form content type is refused", w.alice, "POST", "/api/gateway/v1/agents", map[string]any{"agent_key": "x", "provider": "echo", "model": "m"},
			map[string]string{"Content-Type": "text/plain"}, 403, []string{"CSRF_REJECTED"}, nil},
		{"another origin is refused", w.alice, "DELETE", "/api/gateway/v1/agents/alice-agent", nil,
			map[string]string{"Origin": "https://evil.example"}, 403, []string{"CSRF_REJECTED"}, nil},
		{"the same origin passes", w.alice, "PUT", "/api/gateway/v1/agents/alice-agent", map[string]any{"system_prompt": "terse"},
			map[string]string{"Origin": w.c.api}, 200, []string{`"system_prompt":"terse"`}, nil},
		{"alice sees her agent only", w.alice, "GET", "/api/gateway/v1/agents", nil, nil, 200, []string{"alice-agent"}, []string{"bob-agent"}},
		{"alice cannot read bob's agent", w.alice, "GET", "/api/gateway/v1/agents/bob-agent", nil, nil, 404, nil, nil},
		{"alice cannot run bob's agent", w.alice, "POST", "/api/gateway/v1/agents/bob-agent/wake", map[string]any{"message": "hi"}, nil, 404, nil, nil},
		{"alice sees her traces only", w.alice, "GET", "/api/gateway/v1/traces", nil, nil, 200, []string{w.aliceID}, []string{w.bobID}},
		{"alice cannot ask for bob's traces", w.alice, "GET", "/api/gateway/v1/traces?user_id=" + w.bobID, nil, nil, 403, nil, nil},
		{"alice's usage is hers", w.alice, "GET", "/api/gateway/v1/usage?group_by=user", nil, nil, 200, []string{w.aliceID}, []string{w.bobID}},
		{"a user is no gateway admin", w.alice, "GET", "/api/gateway/v1/activity", nil, nil, 403, nil, nil},
		{"a user cannot add a provider", w.alice, "POST", "/api/gateway/v1/providers", map[string]any{"name": "p", "provider_type": "echo"}, nil, 403, nil, nil},
		{"the admin's agents are theirs, as for X-Gateway-User-Id", w.admin, "GET", "/api/gateway/v1/agents", nil, nil, 200, nil, []string{"alice-agent", "bob-agent"}},
		{"the admin's every-user view lists every agent", w.admin, "GET", "/api/gateway/v1/agents?view=all", nil, nil, 200, []string{"alice-agent", "bob-agent"}, nil},
		{"a user's every-user view is still theirs", w.alice, "GET", "/api/gateway/v1/agents?view=all", nil, nil, 200, []string{"alice-agent"}, []string{"bob-agent"}},
		{"the every-user view is for reads only", w.admin, "POST", "/api/gateway/v1/agents?view=all", map[string]any{"agent_key": "admin-agent", "provider": "echo", "model": "m"}, nil, 201,
			[]string{`"agent_key":"admin-agent"`}, []string{`"owner_id":""`, w.aliceID, w.bobID}},
		{"the admin sees every trace", w.admin, "GET", "/api/gateway/v1/traces", nil, nil, 200, []string{w.aliceID, w.bobID}, nil},
		{"the admin sees usage by user", w.admin, "GET", "/api/gateway/v1/usage?group_by=user", nil, nil, 200, []string{w.aliceID, w.bobID}, nil},
		{"the activity names the console user", w.admin, "GET", "/api/gateway/v1/activity?actor_type=console&action=agent.create", nil, nil, 200,
			[]string{`"actor_id":"` + w.aliceID, `"actor_id":"` + w.bobID}, nil},
		{"the admin makes a gateway key", w.admin, "POST", "/api/gateway/v1/api-keys", map[string]any{"name": "k", "scopes": []string{"operator.read"}, "user_id": w.aliceID}, nil, 201, []string{`"key":"gateway_`}, nil},
		{"an unknown gateway path", w.alice, "GET", "/api/gateway/v1/nothing", nil, nil, 404, nil, nil},
		{"the gateway's docs are not bridged", w.alice, "GET", "/api/gateway/docs", nil, nil, 404, nil, nil},
		{"a bearer token is no session", newClient(w.c.api), "GET", "/api/gateway/v1/agents", nil,
			map[string]string{"Authorization": "Bearer " + bridgeToken}, 401, nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, body := record(tt.cl, tt.method, tt.path, tt.body, tt.hdr)
			if code != tt.want {
				t.Fatalf("%s %s = %d %s; want %d", tt.method, tt.path, code, body, tt.want)
			}
			for _, s := range tt.has {
				if !strings.Contains(body, s) {
					t.Errorf("%s %s does not hold %q: %s", tt.method, tt.path, s, body)
				}
			}
			for _, s := range tt.hasNot {
				if strings.Contains(body, s) {
					t.Errorf("%s %s holds %q: %s", tt.method, tt.path, s, body)
				}
			}
		})
	}

	// The WebSocket RPC on :8080: the session's cookie, same origin only.
	wsURL := "ws" + strings.TrimPrefix(w.c.api, "http") + "/api/gateway/ws"
	cookie := func(cl *client) http.Header {
		req, _ := http.NewRequest("GET", w.c.api, nil)
		for _, c := range cl.hc.Jar.Cookies(req.URL) {
			req.AddCookie(c)
		}
		return http.Header{"Cookie": req.Header.Values("Cookie"), "Origin": {w.c.api}}
	}
	if _, resp, err := websocket.DefaultDialer.Dial(wsURL, http.Header{"Origin": {w.c.api}}); err == nil || resp == nil || resp.StatusCode != 401 {
		t.Errorf("ws without a session: %v %v", resp, err)
	}
	evil := cookie(w.alice)
	evil.Set("Origin", "https://evil.example")
	if _, resp, err := websocket.DefaultDialer.Dial(wsURL, evil); err == nil || resp == nil || resp.StatusCode != 403 {
		t.Errorf("ws from another origin: %v %v", resp, err)
	}
	ws, resp, err := websocket.DefaultDialer.Dial(wsURL, cookie(w.alice))
	if err != nil {
		t.Fatalf("ws with alice's session: %v", err)
	}
	_ = resp.Body.Close()
	defer ws.Close()
	call := func(id, method string, params any) (payload map[string]any, chunks int) {
		t.Helper()
		if err := ws.WriteJSON(map[string]any{"type": "req", "id": id, "method": method, "params": params}); err != nil {
			t.Fatal(err)
		}
		_ = ws.SetReadDeadline(time.Now().Add(20 * time.Second))
		for {
			var f struct {
				Type, ID, Event string
				OK              bool
				Payload         map[string]any
				Error           map[string]any
			}
			if err := ws.ReadJSON(&f); err != nil {
				t.Fatalf("ws read: %v", err)
			}
			b, _ := json.Marshal(f)
			bodies = append(bodies, string(b))
			if f.Type == "event" && f.Event == "chat" && f.Payload["kind"] == "chunk" {
				chunks++
			}
			if f.Type == "res" && f.ID == id {
				if !f.OK {
					return f.Error, -1
				}
				return f.Payload, chunks
			}
		}
	}
	hello, _ := call("1", "status", nil)
	if hello["user_id"] != w.aliceID || hello["role"] != "user" {
		t.Errorf("status = %v", hello)
	}
	res, chunks := call("2", "chat.send", map[string]any{"agentId": "alice-agent", "sessionKey": "bridge-s1", "message": "one two three", "stream": true})
	if res["content"] != "echo: one two three" || chunks != 4 {
		t.Errorf("chat.send = %v with %d chunks", res, chunks)
	}
	hist, _ := call("3", "chat.history", map[string]any{"sessionKey": "bridge-s1"})
	if msgs, _ := hist["messages"].([]any); len(msgs) != 2 {
		t.Errorf("chat.history = %v", hist)
	}
	if e, n := call("4", "chat.send", map[string]any{"agentId": "bob-agent", "sessionKey": "bridge-s2", "message": "hi", "stream": true}); n != -1 || e["code"] != "NOT_FOUND" {
		t.Errorf("chat.send to bob's agent = %v", e)
	}
	// Logging out ends the socket at its next request.
	must("logout", 200)(record(w.alice, "POST", "/api/auth/logout", nil, map[string]string{"Origin": w.c.api}))
	if e, n := call("5", "status", nil); n != -1 || e["code"] != "UNAUTHORIZED" {
		t.Errorf("after logout: %v", e)
	}

	for i, b := range bodies {
		if strings.Contains(b, bridgeToken) {
			t.Errorf("answer %d carries the gateway token: %s", i, b)
		}
	}
	w.c.stop(t)
}
