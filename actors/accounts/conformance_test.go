package accounts_test

import (
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"

	"gatehouse/actors"
	"gatehouse/actors/accounts"
	"gatehouse/actors/actorstest"
	"gatehouse/wal"
)

// Kinds of the accounts' records, as accountsKind names them.
const (
	kUser    = "2 user"
	kSession = "3 session"
	kEnded   = "4 session deleted"
)

// TestConformance runs the Extension conformance suite (restore, offline
// image, replay rule, live apply) over accountsScript, which writes every
// record kind of the accounts: user puts (create, update, a new password,
// a plan, role and licence change), session puts (logins) and session
// deletes (logout, logout-all, and those a new password, role or licence
// writes). Besides the suite:
//   - every step checks the kinds of records it wrote, in order (a
//     password change ends the user's sessions in the same write; a
//     logout-all with nothing to end writes nothing);
//   - the replay rule also runs at every record of one run of the script
//     (Records), not only between steps: the records a step writes
//     together are cut between too;
//   - after each restart, and on the follower after each live apply, the
//     node answers as before (or as the writer): every user by email (an
//     index no section holds) and every token the script was given.
func TestConformance(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex // the checks run in parallel
	drivers := map[*actorstest.Node]*accountsDriver{}
	driverOf := func(n *actorstest.Node) *accountsDriver {
		mu.Lock()
		defer mu.Unlock()
		return drivers[n]
	}
	start := func(tb testing.TB, opts ...actorstest.Option) (*actorstest.Node, actorstest.Driver) {
		d := &accountsDriver{n: actorstest.New(tb, opts...), mu: &mu, tokens: map[string]string{}, users: map[string]uuid.UUID{}}
		d.n.Start()
		mu.Lock()
		drivers[d.n] = d
		mu.Unlock()
		return d.n, d
	}
	actorstest.Conformance(t, actorstest.Domain{
		Start:  start,
		Ext:    func(n *actorstest.Node) actors.Extension { return n.Sys.Service },
		Steps:  len(accountsScript),
		Kind:   accountsKind,
		Covers: []string{kUser, kSession, kEnded},
		// The records of one run of the script, every one a cut: those of
		// the replay-rule check's own node (the suite calls Records with
		// the test its driver ran on), else of a run of its own.
		Records: func(tb testing.TB) []wal.Record {
			var n *actorstest.Node
			mu.Lock()
			for dn, d := range drivers {
				if d.tb == tb && d.done {
					n = dn
				}
			}
			mu.Unlock()
			if n == nil {
				var drv actorstest.Driver
				n, drv = start(tb)
				for i := range accountsScript {
					drv.Step(tb, i)
				}
			}
			var recs []wal.Record
			if err := n.Log.Replay(0, func(_ uint64, r wal.Record) error {
				if n.Sys.Service.Owns(r.Type) {
					recs = append(recs, wal.Record{Type: r.Type, Data: slices.Clone(r.Data)})
				}
				return nil
			}); err != nil {
				tb.Fatal(err)
			}
			if got := len(recs); got != accountsRecords {
				tb.Fatalf("the script wrote %d records, want %d", got, accountsRecords)
			}
			return recs
		},
		Observe: func(tb testing.TB, n *actorstest.Node) any { return driverOf(n).answers(tb, n) },
		AfterRestore: func(tb testing.TB, what string, before any, n *actorstest.Node) {
			if diff := cmp.Diff(before, driverOf(n).answers(tb, n)); diff != "" {
				tb.Errorf("%s: the accounts answer differently (-live +restored):\n%s", what, diff)
			}
		},
		AfterApply: func(tb testing.TB, what string, w, f *actorstest.Node) {
			d := driverOf(w) // the follower is asked about the writer's users and tokens
			if diff := cmp.Diff(d.answers(tb, w), d.answers(tb, f)); diff != "" {
				tb.Errorf("%s: the follower answers differently (-writer +follower):\n%s", what, diff)
			}
		},
	})
}

// accountsKind is a record's type and name ("2 user").
func accountsKind(r wal.Record) string {
	name, _, _ := accounts.DescribeRecord(r.Type, r.Data)
	return fmt.Sprint(r.Type, " ", name)
}

// accountsDriver runs accountsScript on one node, reading its running
// accounts at every step (the suite restarts the node between steps).
type accountsDriver struct {
	n      *actorstest.Node
	mu     *sync.Mutex          // TestConformance's: guards tb and done
	tb     testing.TB           // of the last step
	done   bool                 // every step ran
	tokens map[string]string    // session tokens by name ("a1"), ended ones too
	users  map[string]uuid.UUID // by email
}

// scriptStep is one command of accountsScript and the kinds of the
// records it must write, in order.
type scriptStep struct {
	name   string
	writes []string
	run    func(tb testing.TB, d *accountsDriver, s *accounts.Service) error
}

func (d *accountsDriver) Step(tb testing.TB, i int) {
	tb.Helper()
	st := accountsScript[i]
	s := d.n.Sys.Service
	from, err := d.n.Log.LastIndex()
	if err != nil {
		tb.Fatal(err)
	}
	if err := st.run(tb, d, s); err != nil {
		tb.Fatalf("step %d (%s): %v", i, st.name, err)
	}
	var wrote []string
	if err := d.n.Log.Replay(from, func(_ uint64, r wal.Record) error {
		if s.Owns(r.Type) {
			wrote = append(wrote, accountsKind(r))
		}
		return nil
	}); err != nil {
		tb.Fatal(err)
	}
	if !slices.Equal(wrote, st.writes) {
		tb.Fatalf("step %d (%s) wrote %q, want %q", i, st.name, wrote, st.writes)
	}
	d.mu.Lock()
	d.tb, d.done = tb, i == len(accountsScript)-1
	d.mu.Unlock()
}

// answers is what n's accounts say of the driver's users (by email) and
// tokens (the user each resolves to, or the error).
func (d *accountsDriver) answers(tb testing.TB, n *actorstest.Node) map[string]string {
	tb.Helper()
	ctx, s := actorstest.Ctx(tb), n.Sys.Service
	out := map[string]string{}
	for email := range d.users {
		u, err := s.UserByEmail(ctx, email)
		out["user "+email] = fmt.Sprintf("%v %s %s %s %v %d %v", u.ID, u.Email, u.Role, u.Plan, u.LicenseActive, u.KeyRateLimit, err)
	}
	for name, tok := range d.tokens {
		u, err := s.Authenticate(ctx, tok)
		out["token "+name] = fmt.Sprintf("%v %v", u.ID, err)
	}
	return out
}

func create(email string, role accounts.Role, plan accounts.Plan) func(testing.TB, *accountsDriver, *accounts.Service) error {
	return func(tb testing.TB, d *accountsDriver, s *accounts.Service) error {
		u, err := s.CreateUser(actorstest.Ctx(tb), accounts.NewUser{Email: email, Password: "correct horse", Role: role, Plan: plan, LicenseActive: true})
		d.users[email] = u.ID
		return err
	}
}

func login(email, password, token string) func(testing.TB, *accountsDriver, *accounts.Service) error {
	return func(tb testing.TB, d *accountsDriver, s *accounts.Service) error {
		_, sess, err := s.Login(actorstest.Ctx(tb), email, password)
		d.tokens[token] = sess.Token
		return err
	}
}

func logout(token string) func(testing.TB, *accountsDriver, *accounts.Service) error {
	return func(tb testing.TB, d *accountsDriver, s *accounts.Service) error {
		return s.Logout(actorstest.Ctx(tb), d.tokens[token])
	}
}

func logoutAll(email string) func(testing.TB, *accountsDriver, *accounts.Service) error {
	return func(tb testing.TB, d *accountsDriver, s *accounts.Service) error {
		return s.LogoutAll(actorstest.Ctx(tb), d.users[email])
	}
}

func update(email string, p accounts.UserPatch) func(testing.TB, *accountsDriver, *accounts.Service) error {
	return func(tb testing.TB, d *accountsDriver, s *accounts.Service) error {
		_, err := s.UpdateUser(actorstest.Ctx(tb), d.users[email], p)
		return err
	}
}

func ptr[T any](v T) *T { return &v }

const (
	emailA, emailB = "a@example.com", "b@example.com"
	newPassword    = "another horse"
)

// accountsRecords is how many records accountsScript writes.
var accountsRecords = func() int {
	n := 0
	for _, st := range accountsScript {
		n += len(st.writes)
	}
	return n
}()

// accountsScript writes every record kind of the accounts, each change
// after the state it must replace or remove, and ends with sessions that
// last (else a restore that dropped sessions would pass).
var accountsScript = []scriptStep{
	{"create a", []string{kUser}, create(emailA, accounts.RoleUser, accounts.PlanStandard)},
	{"create b, an admin on premium", []string{kUser}, create(emailB, accounts.RoleAdmin, accounts.PlanPremium)},
	{"login a1", []string{kSession}, login(emailA, "correct horse", "a1")},
	{"login a2", []string{kSession}, login(emailA, "correct horse", "a2")},
	{"login b1", []string{kSession}, login(emailB, "correct horse", "b1")},
	{"logout a1", []string{kEnded}, logout("a1")},
	{"b's plan: standard (sessions stay)", []string{kUser}, update(emailB, accounts.UserPatch{Plan: ptr(accounts.PlanStandard)})},
	{"a's key limit", []string{kUser}, update(emailA, accounts.UserPatch{KeyRateLimit: ptr(int64(500))})},
	{"a's password (ends a2)", []string{kUser, kEnded}, update(emailA, accounts.UserPatch{Password: ptr(newPassword)})},
	{"login a3, new password", []string{kSession}, login(emailA, newPassword, "a3")},
	{"login b2", []string{kSession}, login(emailB, "correct horse", "b2")},
	{"b's role: user (ends b1, b2)", []string{kUser, kEnded, kEnded}, update(emailB, accounts.UserPatch{Role: ptr(accounts.RoleUser)})},
	{"b's licence off (no session to end)", []string{kUser}, update(emailB, accounts.UserPatch{LicenseActive: ptr(false)})},
	{"logout-all a (ends a3)", []string{kEnded}, logoutAll(emailA)},
	{"logout-all a again (nothing)", nil, logoutAll(emailA)},
	{"login b3", []string{kSession}, login(emailB, "correct horse", "b3")},
	{"b's licence on (ends b3)", []string{kUser, kEnded}, update(emailB, accounts.UserPatch{LicenseActive: ptr(true)})},
	{"login a4", []string{kSession}, login(emailA, newPassword, "a4")},
	{"a session lifetime passes (a4 ends, no record)", nil, func(tb testing.TB, d *accountsDriver, _ *accounts.Service) error {
		d.n.Clock.Advance(d.n.AccountsConfig.SessionTTL)
		d.n.Sys.Tick()
		return nil
	}},
	{"login a5", []string{kSession}, login(emailA, newPassword, "a5")},
	{"login b4", []string{kSession}, login(emailB, "correct horse", "b4")},
}
