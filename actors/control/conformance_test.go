package control

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"gatehouse/actors"
	"gatehouse/actors/actorstest"
	"gatehouse/wal"
)

// TestConformance runs the Extension conformance suite (restore, offline
// image, replay rule, live apply) over a script of every record kind:
// tokens created, used (their last use saved), minted from another,
// revoked by their owner and by an admin; services created, updated and
// deleted; key lists set, narrowed and lifted. After each live-apply step
// the follower must also answer like the writer: its View, what its
// subscribers heard, its token lists and its answer to every token.
func TestConformance(t *testing.T) {
	var mu sync.Mutex // the checks run in parallel
	drivers := map[*actorstest.Node]*controlDriver{}
	driver := func(n *actorstest.Node) *controlDriver {
		mu.Lock()
		defer mu.Unlock()
		return drivers[n]
	}
	actorstest.Conformance(t, actorstest.Domain{
		Start: func(tb testing.TB, opts ...actorstest.Option) (*actorstest.Node, actorstest.Driver) {
			d := &controlDriver{secrets: map[string]string{}, ids: map[string]uuid.UUID{},
				alice: uuid.New(), bob: uuid.New(), heir: uuid.New(), key: uuid.New(), key2: uuid.New()}
			d.n = actorstest.New(tb, append(opts, actorstest.WithExtensions(func() []actors.Extension {
				c := New()
				c.Subscribe(func(v *View) { d.heard = v })
				return []actors.Extension{c}
			}))...)
			d.n.Start()
			mu.Lock()
			drivers[d.n] = d
			mu.Unlock()
			return d.n, d
		},
		Steps: len(controlScript),
		Kind:  controlKind,
		Covers: []string{"200 token", "200 service", "200 key_services",
			"201 token", "201 service", "201 key_services"},
		AfterApply: func(tb testing.TB, what string, w, f *actorstest.Node) {
			a, b := ctlOf(w), ctlOf(f)
			sameControl(tb, what, a, b)
			if driver(f).heard != b.View() {
				tb.Errorf("%s: B's subscriber did not hear its latest view", what)
			}
			// B answers A's tokens (its own uses are saved in its own
			// log: both clocks stand at T0, so they match A's).
			ctx := actorstest.Ctx(tb)
			wd := driver(w)
			for name, s := range wd.secrets {
				// One address per check: the revoked tokens' failures
				// would throttle a shared one.
				wd.checks++
				ip := fmt.Sprintf("10.0.%d.%d", wd.checks/250, wd.checks%250+1)
				wa, errA := a.CheckToken(ctx, s, ip)
				wb, errB := b.CheckToken(ctx, s, ip)
				if !errors.Is(errB, errA) && (errA != nil || errB != nil) || wa.ID != wb.ID {
					tb.Errorf("%s: CheckToken(%s) = %v on A, %v on B", what, name, errA, errB)
				}
			}
			if wd.step != len(controlScript) {
				return
			}
			if got, err := b.ListTokens(ctx, wd.alice); err != nil || len(got) != 1 {
				tb.Errorf("B: alice's tokens = %+v, %v; want a1 alone (a2 revoked on A)", got, err)
			}
			if l, ok := b.View().KeyServices(wd.key); !ok || !slices.Equal(l, []string{"t"}) {
				tb.Errorf("B: key services = %v, %v; want [t]", l, ok)
			}
			if _, ok := b.View().KeyServices(wd.key2); ok {
				tb.Error("B: key2's lifted list is still there")
			}
		},
	})
}

func ctlOf(n *actorstest.Node) *Control { return n.Exts[0].(*Control) }

// controlKind is a record's type and entity kind ("200 token").
func controlKind(r wal.Record) string {
	var e struct {
		Kind string `json:"kind"`
	}
	if json.Unmarshal(r.Data, &e) != nil {
		return fmt.Sprint(r.Type)
	}
	return fmt.Sprint(r.Type, " ", e.Kind)
}

// controlDriver runs controlScript on one node.
type controlDriver struct {
	n                           *actorstest.Node
	tb                          testing.TB // of the running step
	step                        int        // steps run
	checks                      int        // token checks AfterApply made
	heard                       *View
	secrets                     map[string]string
	ids                         map[string]uuid.UUID
	alice, bob, heir, key, key2 uuid.UUID
}

func (d *controlDriver) Step(tb testing.TB, i int) {
	tb.Helper()
	d.tb = tb
	if err := controlScript[i](d, ctlOf(d.n)); err != nil {
		tb.Fatalf("step %d: %v", i, err)
	}
	d.step = i + 1
}

func (d *controlDriver) ctx() context.Context { return actorstest.Ctx(d.tb) }

func (d *controlDriver) token(user uuid.UUID, name string, parent uuid.UUID) func(*controlDriver, *Control) error {
	return func(d *controlDriver, c *Control) error {
		tk, s, err := c.CreateToken(d.ctx(), NewToken{UserID: user, Name: name, Scopes: []Scope{ScopeRead},
			ExpiresAt: d.n.Clock.Now().Add(time.Hour), Parent: parent})
		d.secrets[name], d.ids[name] = s, tk.ID
		return err
	}
}

// controlScript holds every record kind control writes, each change of a
// kind after another that it must replace or remove.
var controlScript = []func(d *controlDriver, c *Control) error{
	func(d *controlDriver, c *Control) error { return d.token(d.alice, "a1", uuid.Nil)(d, c) },
	func(d *controlDriver, c *Control) error { return d.token(d.alice, "a2", uuid.Nil)(d, c) },
	func(d *controlDriver, c *Control) error { return d.token(d.bob, "b1", uuid.Nil)(d, c) },
	func(d *controlDriver, c *Control) error { // its last use, saved
		_, err := c.CheckToken(d.ctx(), d.secrets["a1"], "192.0.2.1")
		return err
	},
	func(d *controlDriver, c *Control) error {
		_, err := c.CreateService(d.ctx(), "s", ServiceInput{Upstream: "http://127.0.0.1:9", Headers: map[string]string{"X-K": "v"}, Enabled: true})
		return err
	},
	func(d *controlDriver, c *Control) error {
		_, err := c.CreateService(d.ctx(), "t", ServiceInput{Upstream: "http://127.0.0.1:8", Enabled: true, Timeout: time.Second})
		return err
	},
	func(d *controlDriver, c *Control) error { return c.SetKeyServices(d.ctx(), d.key, []string{"s", "t"}) },
	func(d *controlDriver, c *Control) error {
		_, err := c.UpdateService(d.ctx(), "s", ServiceInput{Upstream: "http://127.0.0.1:10", KeepHeaders: true, Description: "moved"})
		return err
	},
	func(d *controlDriver, c *Control) error { return c.RevokeToken(d.ctx(), d.ids["a2"], d.alice) },
	func(d *controlDriver, c *Control) error { return c.SetKeyServices(d.ctx(), d.key, []string{"t"}) },
	func(d *controlDriver, c *Control) error { return d.token(d.heir, "child", d.ids["b1"])(d, c) },
	func(d *controlDriver, c *Control) error { return c.RevokeToken(d.ctx(), d.ids["b1"], uuid.Nil) }, // an admin's, and its child with it
	func(d *controlDriver, c *Control) error { return c.SetKeyServices(d.ctx(), d.key2, []string{"t"}) },
	func(d *controlDriver, c *Control) error { return c.SetKeyServices(d.ctx(), d.key2, nil) },
	func(d *controlDriver, c *Control) error { return c.DeleteService(d.ctx(), "s") },
}
