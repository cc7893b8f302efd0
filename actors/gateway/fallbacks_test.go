package gateway

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"
)

// TestAgentFallbacks: fallbacks are set by provider name or id, shown with
// the provider's name, validated, replaced and cleared, replayed as they
// were live, and keep their providers from being deleted.
func TestAgentFallbacks(t *testing.T) {
	n := newNode(t, DefaultConfig(), nil)
	gw := start(n)
	var ids []string
	for _, name := range []string{"main", "second", "third"} {
		p, err := gw.CreateProvider(ctx(t), ProviderInput{Name: name, ProviderType: ProviderEcho, Enabled: true})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, p.ID.String())
	}
	fbs := []FallbackInput{{Provider: "second", Model: "m2"}, {Provider: ids[2], Model: "m3"}, {Provider: "main", Model: "other"}}
	a, err := gw.CreateAgent(ctx(t), "alice", AgentInput{AgentKey: ptr("fb"), Provider: ptr("main"), Model: ptr("m1"), Fallbacks: &fbs,
		OtherConfig: &AgentOtherConfig{MaxTokens: 2048}})
	if err != nil {
		t.Fatal(err)
	}
	want := []Fallback{{Provider: "second", Model: "m2"}, {Provider: "third", Model: "m3"}, {Provider: "main", Model: "other"}}
	for i := range want {
		want[i].ProviderID = uuid.MustParse(ids[[]int{1, 2, 0}[i]])
	}
	if diff := cmp.Diff(want, a.Fallbacks); diff != "" || a.OtherConfig.MaxTokens != 2048 {
		t.Errorf("created fallbacks (-want +got):\n%s max_tokens %d, want 2048", diff, a.OtherConfig.MaxTokens)
	}
	// Another agent without fallbacks shows [], not null.
	b, err := gw.CreateAgent(ctx(t), "alice", AgentInput{AgentKey: ptr("plain"), Provider: ptr("second"), Model: ptr("m")})
	if err != nil || b.Fallbacks == nil || len(b.Fallbacks) != 0 {
		t.Fatalf("agent without fallbacks = %v, %v; want []", b.Fallbacks, err)
	}
	// ResolveAgent (what the runtime reads) carries them too.
	ra, _, err := gw.ResolveAgent(ctx(t), "fb")
	if err != nil || !cmp.Equal(ra.Fallbacks, want) {
		t.Errorf("ResolveAgent fallbacks = %v, %v; want %v", ra.Fallbacks, err, want)
	}

	for _, tt := range []struct {
		name string
		in   AgentInput
		want string
	}{
		{"no model", AgentInput{Fallbacks: &[]FallbackInput{{Provider: "second"}}}, "fallbacks[0].model must be 1-200 characters"},
		{"model too long", AgentInput{Fallbacks: &[]FallbackInput{{Provider: "second", Model: strings.Repeat("m", 201)}}}, "fallbacks[0].model"},
		{"unknown provider", AgentInput{Fallbacks: &[]FallbackInput{{Provider: "second", Model: "x"}, {Provider: "nope", Model: "x"}}}, `fallbacks[1].provider "nope" does not exist`},
		{"repeats the primary", AgentInput{Fallbacks: &[]FallbackInput{{Provider: ids[0], Model: "m1"}}}, "fallbacks[0] repeats provider main with model m1"},
		{"repeats a fallback", AgentInput{Fallbacks: &[]FallbackInput{{Provider: "second", Model: "x"}, {Provider: ids[1], Model: "x"}}}, "fallbacks[1] repeats provider second"},
		{"primary moved onto a fallback", AgentInput{Provider: ptr("second"), Model: ptr("m2")}, "fallbacks[0] repeats provider second with model m2"},
		{"too many", AgentInput{Fallbacks: ptr(make([]FallbackInput, MaxFallbacks+1))}, "at most 8 entries"},
		{"max_tokens negative", AgentInput{OtherConfig: &AgentOtherConfig{MaxTokens: -1}}, "other_config.max_tokens must be in 0..1000000"},
		{"max_tokens too large", AgentInput{OtherConfig: &AgentOtherConfig{MaxTokens: MaxAgentMaxTokens + 1}}, "other_config.max_tokens"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := gw.UpdateAgent(ctx(t), "alice", "fb", tt.in); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("UpdateAgent = %v, want ErrInvalid with %q", err, tt.want)
			}
		})
	}
	if got, _ := gw.GetAgent(ctx(t), "alice", "fb"); !cmp.Equal(got.Fallbacks, want) {
		t.Errorf("refused updates changed the fallbacks to %v", got.Fallbacks)
	}
	// Deleting a provider that is only a fallback is refused, naming the agent.
	if err := gw.DeleteProvider(ctx(t), "third"); !errors.Is(err, ErrInUse) || !strings.Contains(err.Error(), "fallback of agent fb") {
		t.Errorf("DeleteProvider(fallback) = %v, want ErrInUse naming agent fb", err)
	}
	// Nil keeps them; the update of another field leaves them as they were.
	if got, err := gw.UpdateAgent(ctx(t), "alice", "fb", AgentInput{SystemPrompt: ptr("hi")}); err != nil || !cmp.Equal(got.Fallbacks, want) {
		t.Errorf("update without fallbacks = %v, %v; want them kept", got.Fallbacks, err)
	}
	// Replace with one, by name.
	one := []FallbackInput{{Provider: "third", Model: "m3"}}
	got, err := gw.UpdateAgent(ctx(t), "alice", "fb", AgentInput{Fallbacks: &one})
	if err != nil || len(got.Fallbacks) != 1 || got.Fallbacks[0].Provider != "third" {
		t.Fatalf("replace fallbacks = %v, %v", got.Fallbacks, err)
	}
	if err := gw.DeleteProvider(ctx(t), "second"); !errors.Is(err, ErrInUse) || !strings.Contains(err.Error(), "used by agent plain") {
		t.Errorf("DeleteProvider(primary of plain) = %v, want ErrInUse", err)
	}

	// Live equals replayed (WAL only, then snapshot + WAL).
	live, _ := gw.GetAgent(ctx(t), "alice", "fb")
	n.Crash()
	gw = start(n)
	if replayed, err := gw.GetAgent(ctx(t), "alice", "fb"); err != nil || !cmp.Equal(live, replayed) {
		t.Errorf("replayed agent differs from live: %s (%v)", cmp.Diff(live, replayed), err)
	}
	if _, err := n.Sys.Snapshot(); err != nil {
		t.Fatal(err)
	}
	n.Crash()
	gw = start(n)
	if restored, err := gw.GetAgent(ctx(t), "alice", "fb"); err != nil || !cmp.Equal(live, restored) {
		t.Errorf("restored agent differs from live: %s (%v)", cmp.Diff(live, restored), err)
	}

	// Clearing them frees the provider.
	got, err = gw.UpdateAgent(ctx(t), "alice", "fb", AgentInput{Fallbacks: &[]FallbackInput{}})
	if err != nil || got.Fallbacks == nil || len(got.Fallbacks) != 0 {
		t.Fatalf("clear fallbacks = %v, %v; want []", got.Fallbacks, err)
	}
	if err := gw.DeleteProvider(ctx(t), "third"); err != nil {
		t.Errorf("DeleteProvider(no longer a fallback) = %v", err)
	}
}
