package control

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"

	"gatehouse/actors"
	"gatehouse/actors/actorstest"
	"gatehouse/wal"
)

// sameControl compares A's and B's state and every read of it.
func sameControl(t testing.TB, what string, a, b *Control) {
	t.Helper()
	ctx := actorstest.Ctx(t)
	sa, err := a.Capture(ctx)
	if err != nil {
		t.Fatal(err)
	}
	sb, err := b.Capture(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(sa, sb) {
		t.Errorf("%s: B's state differs from A's:\nA %s\nB %s", what, sa, sb)
	}
	if diff := cmp.Diff(a.ListServices(), b.ListServices()); diff != "" {
		t.Errorf("%s: services differ (-A +B):\n%s", what, diff)
	}
	if diff := cmp.Diff(a.View().keySvcs, b.View().keySvcs); diff != "" {
		t.Errorf("%s: key services differ (-A +B):\n%s", what, diff)
	}
	users := map[uuid.UUID]bool{}
	var st sectionJSON
	if err := json.Unmarshal(sa, &st); err != nil {
		t.Fatal(err)
	}
	for _, tk := range st.Tokens {
		users[tk.UserID] = true
	}
	for u := range users {
		ta, errA := a.ListTokens(ctx, u)
		tb, errB := b.ListTokens(ctx, u)
		if errA != nil || errB != nil {
			t.Fatal(errA, errB)
		}
		if diff := cmp.Diff(ta, tb); diff != "" {
			t.Errorf("%s: user %s's tokens differ (-A +B):\n%s", what, u, diff)
		}
	}
}

// TestApplyLiveUnknownAndCorrupt: deletes of what B never held change
// nothing; a corrupt record is refused with ErrCorrupt and changes
// nothing either (not even the token it names).
func TestApplyLiveUnknownAndCorrupt(t *testing.T) {
	_, ctl := node(t)
	c := ctl()
	ctx := actorstest.Ctx(t)
	tk, secret, err := c.CreateToken(ctx, NewToken{UserID: uuid.New(), Name: "kept", Scopes: []Scope{ScopeRead}})
	if err != nil {
		t.Fatal(err)
	}
	before, err := c.Capture(ctx)
	if err != nil {
		t.Fatal(err)
	}
	view := c.View()
	for i, r := range []wal.Record{
		deleted(kindToken, uuid.NewString()).record(),
		deleted(kindService, "never").record(),
		deleted(kindKeyServices, uuid.NewString()).record(),
	} {
		if err := c.ApplyLive(ctx, uint64(100+i), r); err != nil {
			t.Errorf("ApplyLive(delete of unknown %d) = %v", i, err)
		}
	}
	for _, data := range []string{
		`{"kind":"token","v":1,"id":"` + tk.ID.String() + `","data":{"id":"not-a-uuid"}}`, // names a token B holds
		`{"kind":"token","v":1,"id":"x","data":{}}`,
		`{"kind":"service","v":1,"id":"a","data":{"name":"b"}}`,
		`{"kind":"nope","v":1,"id":"x","data":{}}`,
	} {
		if err := c.ApplyLive(ctx, 200, walRecord(recSaved, data)); !errors.Is(err, actors.ErrCorrupt) {
			t.Errorf("ApplyLive(%s) = %v, want ErrCorrupt", data, err)
		}
	}
	after, err := c.Capture(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(before, after) {
		t.Errorf("state changed:\nbefore %s\nafter  %s", before, after)
	}
	if _, err := c.CheckToken(ctx, secret, "192.0.2.1"); err != nil {
		t.Errorf("the token a corrupt record named: %v", err)
	}
	if c.View().keySvcs == nil || len(c.View().Services) != len(view.Services) {
		t.Errorf("view changed")
	}
}
