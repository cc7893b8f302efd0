package control

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"

	"gatehouse/actors"
	"gatehouse/actors/actorstest"
	"gatehouse/wal"
)

// TestApplyLiveEqualsWriter is cluster mode's sharing in one process: A
// runs every kind of change, B (another actor system) gets A's records
// through ApplyLive after each step, once or twice each, as a follower of
// the replicated log would. After every step B's state, its View (what
// the proxy reads), what its subscribers heard, its tokens and its answer
// to each token equal A's.
func TestApplyLiveEqualsWriter(t *testing.T) {
	for _, times := range []int{1, 2} {
		t.Run(fmt.Sprintf("%d times", times), func(t *testing.T) {
			an, actl := node(t)
			_, bctl := node(t)
			a, b := actl(), bctl()
			var heard *View
			b.Subscribe(func(v *View) { heard = v })
			ctx := actorstest.Ctx(t)
			alice, bob, key := uuid.New(), uuid.New(), uuid.New()
			secrets := map[string]string{}
			var ids []uuid.UUID
			token := func(user uuid.UUID, name string) func() error {
				return func() error {
					tk, s, err := a.CreateToken(ctx, NewToken{UserID: user, Name: name, Scopes: []Scope{ScopeRead}, ExpiresAt: an.Clock.Now().Add(time.Hour)})
					secrets[name], ids = s, append(ids, tk.ID)
					return err
				}
			}
			steps := []func() error{
				token(alice, "a1"), token(alice, "a2"), token(bob, "b1"),
				func() error { _, err := a.CheckToken(ctx, secrets["a1"], "192.0.2.1"); return err }, // its last use, saved
				func() error {
					_, err := a.CreateService(ctx, "s", ServiceInput{Upstream: "http://127.0.0.1:9", Headers: map[string]string{"X-K": "v"}, Enabled: true})
					return err
				},
				func() error {
					_, err := a.CreateService(ctx, "t", ServiceInput{Upstream: "http://127.0.0.1:8", Enabled: true, Timeout: time.Second})
					return err
				},
				func() error { return a.SetKeyServices(ctx, key, []string{"s", "t"}) },
				func() error {
					_, err := a.UpdateService(ctx, "s", ServiceInput{Upstream: "http://127.0.0.1:10", KeepHeaders: true, Description: "moved"})
					return err
				},
				func() error { return a.RevokeToken(ctx, ids[1], alice) },
				func() error { return a.SetKeyServices(ctx, key, []string{"t"}) },
				func() error { return a.DeleteService(ctx, "s") },
			}
			var last uint64
			for i, step := range steps {
				if err := step(); err != nil {
					t.Fatalf("step %d: %v", i, err)
				}
				err := an.Log.Replay(last, func(seq uint64, r wal.Record) error {
					last = seq
					for range times {
						if err := b.ApplyLive(ctx, seq, r); err != nil {
							return err
						}
					}
					return nil
				})
				if err != nil {
					t.Fatalf("step %d: ApplyLive: %v", i, err)
				}
				sameControl(t, fmt.Sprintf("step %d", i), a, b)
				if heard != b.View() {
					t.Errorf("step %d: B's subscriber did not hear its latest view", i)
				}
				// B answers A's tokens (its own uses are saved in its own
				// log: both clocks stand at T0, so they match A's).
				for name, s := range secrets {
					wa, errA := a.CheckToken(ctx, s, "192.0.2.9")
					wb, errB := b.CheckToken(ctx, s, "192.0.2.9")
					if !errors.Is(errB, errA) && (errA != nil || errB != nil) || wa.ID != wb.ID {
						t.Errorf("step %d: CheckToken(%s) = %v on A, %v on B", i, name, errA, errB)
					}
				}
			}
			if got, err := b.ListTokens(ctx, alice); err != nil || len(got) != 1 {
				t.Errorf("B: alice's tokens = %+v, %v; want a1 alone (a2 revoked on A)", got, err)
			}
			if l, ok := b.View().KeyServices(key); !ok || !slices.Equal(l, []string{"t"}) {
				t.Errorf("B: key services = %v, %v; want [t]", l, ok)
			}
		})
	}
}

// sameControl compares A's and B's state and every read of it.
func sameControl(t *testing.T, what string, a, b *Control) {
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
