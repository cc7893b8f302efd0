package gateway

import (
	"testing"

	"github.com/google/uuid"
)

func TestMemorySearch(t *testing.T) {
	gw := start(newNode(t, DefaultConfig(), nil))
	c := ctx(t)
	p, err := gw.CreateProvider(c, ProviderInput{Name: "echo", ProviderType: ProviderEcho, Enabled: true})
	if err != nil {
		t.Fatal(err)
	}
	a, err := gw.CreateAgent(c, "alice", AgentInput{AgentKey: ptr("a1"), Provider: ptr(p.Name), Model: ptr("m")})
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range []MemoryInput{
		{Content: "Alice drinks green tea every morning", Agent: "a1", UserID: "alice"},
		{Content: "Alice's cat is called Miso", Agent: "a1", UserID: "alice", Tags: []string{"pets"}},
		{Content: "Bob drinks tea, never coffee", Agent: "a1", UserID: "bob"},
		{Content: "The office serves coffee and tea", Agent: "a1"},
		{Content: "Tea tea tea: a global note about tea"},
		{Content: "unrelated note", UserID: "alice"},
	} {
		if _, err := gw.SaveMemory(c, in); err != nil {
			t.Fatal(err)
		}
	}
	hits, err := gw.SearchMemory(c, a.ID, "alice", "tea", 10)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, h := range hits {
		got = append(got, h.Content)
		if h.UserID == "bob" {
			t.Errorf("bob's entry reached alice's run: %q", h.Content)
		}
	}
	if len(got) != 3 || got[0] != "Tea tea tea: a global note about tea" {
		t.Errorf("hits = %q, want alice's, the agent's and the global entry about tea, the densest first", got)
	}
	if hits, _ := gw.SearchMemory(c, a.ID, "alice", "pets", 10); len(hits) != 1 || hits[0].Content != "Alice's cat is called Miso" {
		t.Errorf("tag search = %v", hits)
	}
	if hits, _ := gw.SearchMemory(c, uuid.New(), "bob", "tea", 10); len(hits) != 1 {
		t.Errorf("another agent for bob = %v, want the global entry only", hits)
	}
	if _, err := gw.SaveMemory(c, MemoryInput{Content: " "}); err == nil {
		t.Error("empty content accepted")
	}
}
