package gateway

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"

	"gatehouse/wal"
)

var (
	fxBudget = uuid.MustParse("44444444-5555-4666-8777-888888888888")
	fxHold   = uuid.MustParse("55555555-6666-4777-8888-999999999999")
)

// budgetGolden are the budget records this build writes, one golden file
// each (the other kinds' are in records_test.go).
func budgetGolden() []struct {
	file string
	ev   event
} {
	return []struct {
		file string
		ev   event
	}{
		{"070_entity_saved_budget", entitySaved{&budgetRec{ID: fxBudget, Subject: BudgetSubject{SubjectAgent, fxAgent.String()},
			Period: PeriodDay, HasUSD: true, MaxNano: 2_500_000_000, MaxTokens: 100_000, MaxTPM: 20_000, CreatedAt: fxAt, UpdatedAt: fxAt.Add(time.Minute)}}},
		{"070_entity_saved_budget_ledger", entitySaved{&ledgerRec{ID: fxBudget, Seq: 42, Period: "d:2026-11-22", SpentNano: 1_234_567, SpentTokens: 900,
			Holds:  []holdRec{{ID: fxHold, Period: "d:2026-11-22", Nano: 50_000, Tokens: 4200, At: fxAt.Unix()}},
			Window: []winRec{{At: fxAt.Unix() - 30, Tokens: 900, Hold: fxKeyID}, {At: fxAt.Unix(), Tokens: 4200, Hold: fxHold}}}}},
		{"074_budget_reserved", budgetReserved{V: 1, Budget: fxBudget, Hold: fxHold, Period: "d:2026-11-22", Nano: 50_000, Tokens: 4200, At: fxAt.Unix()}},
		{"075_budget_settled", budgetSettled{V: 1, Budget: fxBudget, Hold: fxHold, Nano: 12_345, Tokens: 321}},
		{"075_budget_settled_interrupted", budgetSettled{V: 1, Budget: fxBudget, Hold: fxHold, Nano: 50_000, Tokens: 4200, Interrupted: true}},
	}
}

// TestBudgetGolden pins the budget records' payloads (go test -run
// BudgetGolden -update rewrites them).
func TestBudgetGolden(t *testing.T) {
	for _, g := range budgetGolden() {
		t.Run(g.file, func(t *testing.T) {
			r := g.ev.record()
			path := filepath.Join("testdata", g.file+".golden")
			if *update {
				if err := os.WriteFile(path, append(r.Data, '\n'), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want := readGolden(t, path)
			if diff := cmp.Diff(string(want), string(r.Data)); diff != "" {
				t.Errorf("payload differs from %s (-golden +got):\n%s", path, diff)
			}
			got, err := decodeEvent(wal.Record{Type: r.Type, Data: want})
			if err != nil {
				t.Fatalf("decodeEvent(golden) = %v", err)
			}
			if diff := cmp.Diff(g.ev, got, eventCmp, cmp.AllowUnexported(budgetRec{})); diff != "" {
				t.Errorf("decodeEvent(golden) mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestBudgetRecordsRefuseBadInput(t *testing.T) {
	for _, r := range []wal.Record{
		{Type: recBudgetReserved, Data: []byte(`{"v":2,"budget_id":"` + fxBudget.String() + `","reservation_id":"` + fxHold.String() + `"}`)},
		{Type: recBudgetSettled, Data: []byte(`{"v":1,"budget_id":"` + fxBudget.String() + `"}`)},
		{Type: recBudgetSettled, Data: []byte(`not json`)},
	} {
		if _, err := decodeEvent(r); err == nil {
			t.Errorf("decodeEvent(%d %s) = nil error", r.Type, r.Data)
		}
	}
}

// TestLedger drives one ledger through reservations and settlements.
func TestLedger(t *testing.T) {
	day := time.Date(2026, 11, 28, 23, 59, 0, 0, time.UTC)
	noon := day.Add(-12 * time.Hour)
	h := func(i byte) uuid.UUID { return uuid.UUID{15: i} }
	type step struct {
		reserve     *budgetReserved
		settle      *budgetSettled
		at          time.Time
		wantSpent   int64
		wantHeld    int64
		wantMinute  int64
		wantRefusal string // of a further 100 nano / 100 tokens at `at`
	}
	lim := budgetLimits{period: PeriodDay, nano: 1000, tokens: 10_000, tpm: 500}
	dk := func(t time.Time) string { return periodKey(PeriodDay, t) }
	tests := []struct {
		name  string
		steps []step
	}{
		{"reserve then settle less", []step{
			{reserve: &budgetReserved{Hold: h(1), Period: dk(day), Nano: 600, Tokens: 200, At: day.Unix()}, at: day, wantHeld: 600, wantMinute: 200},
			{settle: &budgetSettled{Hold: h(1), Nano: 250, Tokens: 50}, at: day, wantSpent: 250, wantMinute: 50},
		}},
		{"full budget refuses", []step{
			{reserve: &budgetReserved{Hold: h(1), Period: dk(day), Nano: 950, Tokens: 10, At: day.Unix()}, at: day, wantHeld: 950, wantMinute: 10, wantRefusal: "max_usd"},
			{settle: &budgetSettled{Hold: h(1), Nano: 0, Tokens: 0}, at: day}, // released
		}},
		{"settled twice counts once", []step{
			{reserve: &budgetReserved{Hold: h(1), Period: dk(day), Nano: 100, Tokens: 10, At: day.Unix()}, at: day, wantHeld: 100, wantMinute: 10},
			{settle: &budgetSettled{Hold: h(1), Nano: 100, Tokens: 10}, at: day, wantSpent: 100, wantMinute: 10},
			{settle: &budgetSettled{Hold: h(1), Nano: 100, Tokens: 10}, at: day, wantSpent: 100, wantMinute: 10},
		}},
		{"rollover: the old period's hold settles into the old period", []step{
			{reserve: &budgetReserved{Hold: h(1), Period: dk(day), Nano: 300, Tokens: 10, At: day.Unix()}, at: day, wantHeld: 300, wantMinute: 10},
			{reserve: &budgetReserved{Hold: h(2), Period: dk(day.Add(2 * time.Minute)), Nano: 200, Tokens: 10, At: day.Add(2 * time.Minute).Unix()},
				at: day.Add(2 * time.Minute), wantHeld: 200, wantMinute: 0 + 10 /* h1 left the minute */},
			{settle: &budgetSettled{Hold: h(1), Nano: 300, Tokens: 10}, at: day.Add(2 * time.Minute), wantHeld: 200, wantMinute: 10},
			{settle: &budgetSettled{Hold: h(2), Nano: 150, Tokens: 10}, at: day.Add(2 * time.Minute), wantSpent: 150, wantMinute: 10},
		}},
		{"tokens per minute: a sliding window", []step{
			{reserve: &budgetReserved{Hold: h(1), Period: dk(noon), Nano: 1, Tokens: 450, At: noon.Unix()}, at: noon, wantHeld: 1, wantMinute: 450, wantRefusal: "max_tokens_per_minute"},
			{settle: &budgetSettled{Hold: h(1), Nano: 1, Tokens: 420}, at: noon.Add(59 * time.Second), wantSpent: 1, wantMinute: 420, wantRefusal: "max_tokens_per_minute"},
			{at: noon.Add(60 * time.Second), wantSpent: 1, wantMinute: 0},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ls := ledgers{}
			seq := uint64(0)
			for i, s := range tt.steps {
				seq++
				switch {
				case s.reserve != nil:
					e := *s.reserve
					e.Budget = fxBudget
					ls.apply(seq, e)
				case s.settle != nil:
					e := *s.settle
					e.Budget = fxBudget
					ls.apply(seq, e)
				}
				l := ls[fxBudget]
				sp := l.spendAt(l.periodFor(PeriodDay, s.at), s.at.Unix())
				if sp.spentNano != s.wantSpent || sp.reservedNano != s.wantHeld || sp.minuteTokens != s.wantMinute {
					t.Errorf("step %d: spent %d held %d minute %d, want %d %d %d", i, sp.spentNano, sp.reservedNano, sp.minuteTokens, s.wantSpent, s.wantHeld, s.wantMinute)
				}
				if got := sp.refusal(lim, 100, 100); got != s.wantRefusal {
					t.Errorf("step %d: refusal of 100 = %q, want %q", i, got, s.wantRefusal)
				}
				// Replaying a record the ledger reflects changes nothing.
				before := *l.clone()
				if s.reserve != nil {
					ls.apply(seq, budgetReserved{Budget: fxBudget, Hold: uuid.New(), Period: "x", Nano: 1, At: 1})
				}
				if diff := cmp.Diff(before, *ls[fxBudget]); diff != "" {
					t.Errorf("step %d: a reflected record changed the ledger:\n%s", i, diff)
				}
			}
		})
	}
}

func TestPeriods(t *testing.T) {
	now := time.Date(2026, 12, 31, 23, 30, 0, 0, time.UTC)
	tests := []struct {
		period, key string
		reset       time.Time
		resets      bool
	}{
		{PeriodDay, "d:2026-12-31", time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC), true},
		{PeriodMonth, "m:2026-12", time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC), true},
		{PeriodTotal, "t", time.Time{}, false},
	}
	for _, tt := range tests {
		if got := periodKey(tt.period, now); got != tt.key {
			t.Errorf("periodKey(%s) = %q, want %q", tt.period, got, tt.key)
		}
		if got, ok := resetOf(tt.period, now); !got.Equal(tt.reset) || ok != tt.resets {
			t.Errorf("resetOf(%s) = %v %v, want %v %v", tt.period, got, ok, tt.reset, tt.resets)
		}
	}
	// A clock that went back keeps the ledger's newer period.
	l := &ledgerRec{Period: "d:2027-01-01"}
	if got := l.periodFor(PeriodDay, now); got != "d:2027-01-01" {
		t.Errorf("periodFor after the clock went back = %q", got)
	}
	if got := l.periodFor(PeriodMonth, now); got != "m:2026-12" {
		t.Errorf("periodFor of another kind = %q", got)
	}
}

func budgetNode(t *testing.T, cfg Config) (*Gateway, func() *Gateway, func() *Gateway) {
	t.Helper()
	n := newNode(t, cfg, nil)
	gw := start(n)
	crash := func() *Gateway { n.Crash(); return start(n) }
	snap := func() *Gateway {
		if _, err := n.Sys.Snapshot(); err != nil {
			t.Fatal(err)
		}
		return gw
	}
	return gw, crash, snap
}

// TestBudgetCrashSettlesOnce: a reservation without settlement is counted
// as spent at its full amount after a restart, once, whether the
// restart replays the WAL or a snapshot taken while it was held.
func TestBudgetCrashSettlesOnce(t *testing.T) {
	for _, snapshot := range []bool{false, true} {
		t.Run(map[bool]string{false: "wal", true: "snapshot"}[snapshot], func(t *testing.T) {
			gw, crash, snap := budgetNode(t, DefaultConfig())
			b, err := gw.CreateBudget(ctx(t), BudgetInput{Subject: &BudgetSubject{SubjectUser, "alice"}, Period: ptr(PeriodTotal), MaxUSD: ptr(1.0), MaxTokens: ptr(int64(1000))})
			if err != nil {
				t.Fatal(err)
			}
			call := BudgetCall{User: "alice", Nano: usdNano(0.25), Tokens: 300}
			done, err := gw.ReserveBudgets(ctx(t), call)
			if err != nil {
				t.Fatal(err)
			}
			gw.SettleBudgets(done, usdNano(0.1), 100)
			if err := gw.FlushBudgets(ctx(t), false); err != nil { // the settlement is written
				t.Fatal(err)
			}
			if _, err := gw.ReserveBudgets(ctx(t), call); err != nil { // held when the process dies
				t.Fatal(err)
			}
			if snapshot {
				snap()
			}
			got, _ := gw.GetBudget(ctx(t), b.ID.String())
			if got.ReservedUSD != 0.25 || got.SpentUSD != 0.1 {
				t.Fatalf("before crash: %+v", got)
			}
			for i := range 2 {
				gw = crash()
				got, err = gw.GetBudget(ctx(t), b.ID.String())
				if err != nil || got.SpentUSD != 0.35 || got.SpentTokens != 400 || got.ReservedUSD != 0 || got.ReservedTokens != 0 {
					t.Errorf("after restart %d: %+v, %v; want spent 0.35 USD and 400 tokens, nothing reserved", i+1, got, err)
				}
			}
		})
	}
}

// TestBudgetReplayEqualsLive: the section captured live equals the one
// captured after a WAL-only restart and after snapshot + WAL.
func TestBudgetReplayEqualsLive(t *testing.T) {
	gw, crash, snap := budgetNode(t, DefaultConfig())
	a := mkBudgetAgent(t, gw)
	_, raw, err := gw.CreateAPIKey(ctx(t), NewAPIKey{Name: "k", Scopes: []Scope{ScopeWrite}, UserID: "bob"})
	if err != nil || raw == "" {
		t.Fatal(err)
	}
	keys, _ := gw.ListAPIKeys(ctx(t))
	for _, in := range []BudgetInput{
		{Subject: &BudgetSubject{SubjectAgent, a.AgentKey}, Period: ptr(PeriodDay), MaxUSD: ptr(5.0)},
		{Subject: &BudgetSubject{SubjectAPIKey, keys[0].ID.String()}, Period: ptr(PeriodMonth), MaxTokens: ptr(int64(50_000)), MaxTokensPerMinute: ptr(int64(9000))},
		{Subject: &BudgetSubject{SubjectUser, "bob"}, Period: ptr(PeriodTotal), MaxUSD: ptr(2.0)},
	} {
		if _, err := gw.CreateBudget(ctx(t), in); err != nil {
			t.Fatalf("CreateBudget(%+v) = %v", in, err)
		}
	}
	work := func(gw *Gateway, n int) {
		for i := range n {
			h, err := gw.ReserveBudgets(ctx(t), BudgetCall{KeyID: keys[0].ID, User: "bob", Agent: a.ID, Nano: 10_000_000, Tokens: 800})
			if err != nil {
				t.Fatal(err)
			}
			gw.SettleBudgets(h, int64(1_000_000*int64(i)), int64(100*i))
		}
	}
	work(gw, 5)
	gw = snap()
	work(gw, 4)
	if err := gw.FlushBudgets(ctx(t), true); err != nil { // every allowance given back: nothing left for a restart to settle
		t.Fatal(err)
	}
	live, err := gw.Capture(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	gw = crash()
	restored, err := gw.Capture(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(live), string(restored)); diff != "" {
		t.Errorf("restored state differs from live (-live +restored):\n%s", diff)
	}
	bs, _ := gw.ListBudgets(ctx(t))
	for _, b := range bs {
		if b.SpentTokens != 100*(0+1+2+3+4+0+1+2+3) || b.ReservedTokens != 0 {
			t.Errorf("budget %s: spent %d tokens, reserved %d", b.Subject, b.SpentTokens, b.ReservedTokens)
		}
	}
}

func mkBudgetAgent(t *testing.T, gw *Gateway) Agent {
	t.Helper()
	if _, err := gw.CreateProvider(ctx(t), ProviderInput{Name: "echo", ProviderType: ProviderEcho, Enabled: true}); err != nil {
		t.Fatal(err)
	}
	a, err := gw.CreateAgent(ctx(t), "bob", AgentInput{AgentKey: ptr("helper"), Provider: ptr("echo"), Model: ptr("m")})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// TestBudgetValidation: the API's refusals name the field.
func TestBudgetValidation(t *testing.T) {
	gw, _, _ := budgetNode(t, DefaultConfig())
	mkBudgetAgent(t, gw)
	user := &BudgetSubject{SubjectUser, "alice"}
	tests := []struct {
		name string
		in   BudgetInput
		want error
	}{
		{"no subject", BudgetInput{Period: ptr(PeriodDay), MaxUSD: ptr(1.0)}, ErrInvalid},
		{"bad type", BudgetInput{Subject: &BudgetSubject{"team", "x"}, Period: ptr(PeriodDay), MaxUSD: ptr(1.0)}, ErrInvalid},
		{"bad period", BudgetInput{Subject: user, Period: ptr("week"), MaxUSD: ptr(1.0)}, ErrInvalid},
		{"no max", BudgetInput{Subject: user, Period: ptr(PeriodDay)}, ErrInvalid},
		{"negative", BudgetInput{Subject: user, Period: ptr(PeriodDay), MaxUSD: ptr(-1.0)}, ErrInvalid},
		{"unknown agent", BudgetInput{Subject: &BudgetSubject{SubjectAgent, "nobody"}, Period: ptr(PeriodDay), MaxUSD: ptr(1.0)}, ErrNotFound},
		{"unknown key", BudgetInput{Subject: &BudgetSubject{SubjectAPIKey, uuid.NewString()}, Period: ptr(PeriodDay), MaxUSD: ptr(1.0)}, ErrNotFound},
		{"ok", BudgetInput{Subject: user, Period: ptr(PeriodDay), MaxUSD: ptr(1.0)}, nil},
		{"taken", BudgetInput{Subject: user, Period: ptr(PeriodDay), MaxTokens: ptr(int64(5))}, ErrExists},
		{"agent by key", BudgetInput{Subject: &BudgetSubject{SubjectAgent, "helper"}, Period: ptr(PeriodDay), MaxUSD: ptr(1.0)}, nil},
	}
	for _, tt := range tests {
		if _, err := gw.CreateBudget(ctx(t), tt.in); !errors.Is(err, tt.want) || (tt.want == nil) != (err == nil) {
			t.Errorf("%s: CreateBudget = %v, want %v", tt.name, err, tt.want)
		}
	}
	cfg := DefaultConfig()
	cfg.NodeID = "n1"
	cfg.DefaultUserBudget = DefaultBudget{Period: PeriodDay, MaxUSD: 1}
	gw, _, _ = budgetNode(t, cfg)
	if _, err := gw.CreateBudget(ctx(t), BudgetInput{Subject: user, Period: ptr(PeriodDay), MaxUSD: ptr(1.0)}); err != nil {
		t.Errorf("cluster mode: CreateBudget = %v", err)
	}
}

// TestBudgetRefusalReleases: a call that does not fit one budget is
// refused and releases what it reserved on the others; the default user
// budget applies to a user without one.
func TestBudgetRefusalReleases(t *testing.T) {
	cfg := DefaultConfig()
	cfg.DefaultUserBudget = DefaultBudget{Period: PeriodDay, MaxUSD: 1}
	reg := prometheus.NewRegistry()
	cfg.Registerer = reg
	gw, _, _ := budgetNode(t, cfg)
	a := mkBudgetAgent(t, gw)
	ab, err := gw.CreateBudget(ctx(t), BudgetInput{Subject: &BudgetSubject{SubjectAgent, a.ID.String()}, Period: ptr(PeriodMonth), MaxUSD: ptr(10.0)})
	if err != nil {
		t.Fatal(err)
	}
	_, err = gw.ReserveBudgets(ctx(t), BudgetCall{User: "carol", Agent: a.ID, Nano: usdNano(1.5)})
	var be *BudgetExceeded
	if !errors.As(err, &be) || !errors.Is(err, ErrBudgetExceeded) || be.Subject.ID != "carol" || be.Cap != "max_usd" || be.ResetsAt.IsZero() {
		t.Fatalf("ReserveBudgets over carol's default = %v (%+v)", err, be)
	}
	got, _ := gw.GetBudget(ctx(t), ab.ID.String())
	if got.ReservedUSD != 0 {
		t.Errorf("agent budget after the refusal: reserved %v, want 0 (released)", got.ReservedUSD)
	}
	mine, err := gw.MyBudgets(ctx(t), "carol")
	if err != nil || len(mine) != 1 || !mine[0].Default || *mine[0].MaxUSD != 1 {
		t.Errorf("MyBudgets(carol) = %+v, %v; want the default", mine, err)
	}
	mine, err = gw.MyBudgets(ctx(t), "bob") // owns the agent
	if err != nil || len(mine) != 2 {
		t.Errorf("MyBudgets(bob) = %+v, %v; want his default and his agent's", mine, err)
	}
	h, err := gw.ReserveBudgets(ctx(t), BudgetCall{User: "carol", Agent: a.ID, Nano: usdNano(0.5)})
	if err != nil || !h.Active() || h.Remaining.Nano != usdNano((0.5)) {
		t.Fatalf("ReserveBudgets = %+v, %v", h, err)
	}
	gw.SettleBudgets(h, usdNano(0.2), 10)
	rem, ok, err := gw.BudgetRemainingFor(ctx(t), BudgetCall{User: "carol", Agent: a.ID}) // behind the settlement
	if err != nil || !ok || rem.Nano != usdNano(0.8) || rem.Tokens != -1 {
		t.Errorf("remaining after settle = %+v, %v, %v; want 0.8 USD, no token cap", rem, ok, err)
	}
	want := map[string]float64{
		`gatehouse_budget_refusals_total{subject_type="user"}`:   1,
		`gatehouse_budget_spent_usd_total{subject_type="user"}`:  0.2,
		`gatehouse_budget_spent_usd_total{subject_type="agent"}`: 0.2,
	}
	if _, err := gw.ListBudgets(ctx(t)); err != nil { // behind every settlement
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			if len(m.GetLabel()) != 1 {
				continue
			}
			k := fmt.Sprintf("%s{subject_type=%q}", mf.GetName(), m.GetLabel()[0].GetValue())
			if w, ok := want[k]; ok {
				if got := m.GetCounter().GetValue(); got != w {
					t.Errorf("%s = %v, want %v", k, got, w)
				}
				delete(want, k)
			}
		}
	}
	if len(want) > 0 {
		t.Errorf("metrics missing: %v", want)
	}
	if err := gw.DeleteBudget(ctx(t), ab.ID.String()); err != nil {
		t.Fatal(err)
	}
	if _, err := gw.GetBudget(ctx(t), ab.ID.String()); !errors.Is(err, ErrNotFound) {
		t.Errorf("deleted budget: %v", err)
	}
}

// BenchmarkBudgetCall is one call's reservation and settlement against
// three budgets (key, user, agent): 6 WAL appends on 3 tenant shards.
func BenchmarkBudgetCall(b *testing.B) {
	n := newNode(b, DefaultConfig(), nil)
	gw := start(n)
	c := ctx(b)
	if _, err := gw.CreateProvider(c, ProviderInput{Name: "echo", ProviderType: ProviderEcho, Enabled: true}); err != nil {
		b.Fatal(err)
	}
	a, err := gw.CreateAgent(c, "bob", AgentInput{AgentKey: ptr("helper"), Provider: ptr("echo"), Model: ptr("m")})
	if err != nil {
		b.Fatal(err)
	}
	key := uuid.New()
	for _, s := range []BudgetSubject{{SubjectUser, "bob"}, {SubjectAgent, a.ID.String()}} {
		if _, err := gw.CreateBudget(c, BudgetInput{Subject: &s, Period: ptr(PeriodDay), MaxUSD: ptr(1e6)}); err != nil {
			b.Fatal(err)
		}
	}
	call := BudgetCall{KeyID: key, User: "bob", Agent: a.ID, Nano: 1000, Tokens: 10}
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			h, err := gw.ReserveBudgets(c, call)
			if err != nil {
				b.Error(err)
				return
			}
			gw.SettleBudgets(h, 500, 5)
		}
	})
}

// TestBudgetRollover: a call reserved before midnight settles into that
// day; the new day starts at zero and its own calls count in it.
func TestBudgetRollover(t *testing.T) {
	n := newNode(t, DefaultConfig(), nil)
	gw := start(n)
	n.Clock.Set(time.Date(2026, 11, 28, 23, 59, 30, 0, time.UTC))
	b, err := gw.CreateBudget(ctx(t), BudgetInput{Subject: &BudgetSubject{SubjectUser, "alice"}, Period: ptr(PeriodDay), MaxTokens: ptr(int64(1000))})
	if err != nil {
		t.Fatal(err)
	}
	old, err := gw.ReserveBudgets(ctx(t), BudgetCall{User: "alice", Tokens: 700})
	if err != nil {
		t.Fatal(err)
	}
	n.Clock.Advance(time.Minute) // 00:00:30 the next day
	fresh, err := gw.ReserveBudgets(ctx(t), BudgetCall{User: "alice", Tokens: 900})
	if err != nil {
		t.Fatalf("the new day's first call: %v (the old day's hold must not count)", err)
	}
	gw.SettleBudgets(old, 0, 650)
	got, _ := gw.GetBudget(ctx(t), b.ID.String())
	if got.SpentTokens != 0 || got.ReservedTokens != 900 || got.ResetsAt == nil || !got.ResetsAt.Equal(time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("after the old day's settlement: %+v, want nothing spent today, 900 held, reset at the 30th", got)
	}
	gw.SettleBudgets(fresh, 0, 100)
	if got, _ = gw.GetBudget(ctx(t), b.ID.String()); got.SpentTokens != 100 || got.ReservedTokens != 0 {
		t.Errorf("after today's settlement: spent %d, reserved %d; want 100, 0", got.SpentTokens, got.ReservedTokens)
	}
}

// TestAppendUUID: the allocation-free form is uuid's canonical text.
func TestAppendUUID(t *testing.T) {
	for range 100 {
		u := uuid.New()
		if got := string(appendUUID(nil, u)); got != u.String() {
			t.Fatalf("appendUUID(%v) = %s", u, got)
		}
	}
}

// TestBudgetAllowance: calls spend from the node's allowance, a hold
// written for many calls (chunkCalls worst cases, at most 1/chunkShare of
// the cap); what they cost shows at once and is settled at the next
// flush or with the next hold; an allowance nobody spends from goes back
// at the flush after;
// a crash counts the unsettled part of a hold at its full amount.
func TestBudgetAllowance(t *testing.T) {
	gw, crash, _ := budgetNode(t, DefaultConfig())
	// A cap so large that a hold is chunkCalls calls (not 1/chunkShare of it).
	b, err := gw.CreateBudget(ctx(t), BudgetInput{Subject: &BudgetSubject{SubjectUser, "alice"}, Period: ptr(PeriodTotal), MaxTokens: ptr(int64(1e12))})
	if err != nil {
		t.Fatal(err)
	}
	ledger := func(gw *Gateway) (holds int, held, spent int64) {
		t.Helper()
		type out struct {
			n           int
			held, spent int64
		}
		o, err := callTenant(ctx(t), gw, gw.tenantFor(budgetTenant(b.ID)), func(ts *tenantShard) (out, error) {
			var o out
			if l := ts.part.ledgers[b.ID]; l != nil {
				o.n, o.spent = len(l.Holds), l.SpentTokens
				for _, h := range l.Holds {
					o.held += h.Tokens
				}
			}
			return o, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return o.n, o.held, o.spent
	}
	const per = int64(chunkCalls) // calls of 1000 tokens a hold covers
	const calls = 3*per + 8       // the fourth hold has 8 calls
	call := BudgetCall{User: "alice", Tokens: 1000}
	for range calls {
		h, err := gw.ReserveBudgets(ctx(t), call)
		if err != nil {
			t.Fatal(err)
		}
		gw.SettleBudgets(h, 0, 500)
	}
	// Each new hold settles the calls of the ones before, in its write.
	if n, held, spent := ledger(gw); n != 1 || held != per*1000 || spent != 3*per*500 {
		t.Errorf("after %d calls: %d holds of %d tokens, %d spent in the ledger; want the fourth hold of %d calls, the first three's calls settled", calls, n, held, spent, per)
	}
	if got, _ := gw.GetBudget(ctx(t), b.ID.String()); got.SpentTokens != calls*500 || got.ReservedTokens != 0 {
		t.Errorf("shown before the flush: spent %d reserved %d; want %d, 0", got.SpentTokens, got.ReservedTokens, calls*500)
	}
	if err := gw.FlushBudgets(ctx(t), false); err != nil {
		t.Fatal(err)
	}
	if n, held, spent := ledger(gw); n != 1 || held != (per-8)*1000 || spent != calls*500 {
		t.Errorf("after a flush: %d holds of %d tokens, %d spent; want the one being spent from (its rest), %d settled", n, held, spent, calls*500)
	}
	if err := gw.FlushBudgets(ctx(t), false); err != nil { // nobody spent from it since
		t.Fatal(err)
	}
	if n, _, spent := ledger(gw); n != 0 || spent != calls*500 {
		t.Errorf("after an idle flush: %d holds, %d spent; want none, %d", n, spent, calls*500)
	}
	for range 10 {
		h, err := gw.ReserveBudgets(ctx(t), call)
		if err != nil {
			t.Fatal(err)
		}
		gw.SettleBudgets(h, 0, 500)
	}
	gw = crash() // the 10 calls' 5000 tokens were never settled: their hold counts in full
	if n, _, spent := ledger(gw); n != 0 || spent != calls*500+per*1000 {
		t.Errorf("after the crash: %d holds, %d spent; want none, %d (the hold at its full amount)", n, spent, calls*500+per*1000)
	}
}

// TestChunk: a hold is chunkCalls worst cases, at most 1/chunkShare of
// its cap, at least one worst case, at most what is left.
func TestChunk(t *testing.T) {
	for _, tt := range []struct {
		need, capOf, avail, want int64
	}{
		{1000, -1, -1, chunkCalls * 1000},     // no cap
		{1000, 1e12, 1e12, chunkCalls * 1000}, // a cap far above
		{1000, 3_200_000, 3_200_000, 100_000}, // 1/32 of the cap
		{1000, 16_000, 16_000, 1000},          // at least the call
		{1000, 1e12, 5000, 5000},              // at most what is left
		{0, 1e9, 1e9, 0},                      // a free call holds nothing
	} {
		if got := chunk(tt.need, tt.capOf, tt.avail, chunkShare); got != tt.want {
			t.Errorf("chunk(%d, %d, %d) = %d, want %d", tt.need, tt.capOf, tt.avail, got, tt.want)
		}
	}
}

// TestBudgetLoweredCap: a lower cap takes effect at the next call: what
// the node held under the old cap goes back first, so the calls cannot
// go on spending an allowance taken under the old one.
func TestBudgetLoweredCap(t *testing.T) {
	n := newNode(t, DefaultConfig(), nil)
	gw := start(n)
	b, err := gw.CreateBudget(ctx(t), BudgetInput{Subject: &BudgetSubject{SubjectUser, "alice"}, Period: ptr(PeriodTotal), MaxTokens: ptr(int64(1_000_000))})
	if err != nil {
		t.Fatal(err)
	}
	h, err := gw.ReserveBudgets(ctx(t), BudgetCall{User: "alice", Tokens: 1000}) // a hold of 64 calls
	if err != nil {
		t.Fatal(err)
	}
	gw.SettleBudgets(h, 0, 1000)
	n.Clock.Advance(time.Second) // a new UpdatedAt
	if _, err := gw.UpdateBudget(ctx(t), b.ID.String(), BudgetInput{MaxTokens: ptr(int64(2500))}); err != nil {
		t.Fatal(err)
	}
	admitted := 0
	for range 10 {
		h, err := gw.ReserveBudgets(ctx(t), BudgetCall{User: "alice", Tokens: 1000})
		if errors.Is(err, ErrBudgetExceeded) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		gw.SettleBudgets(h, 0, 1000)
		admitted++
	}
	if admitted != 1 {
		t.Errorf("after lowering the cap to 2500 with 1000 spent: %d calls of 1000 admitted, want 1", admitted)
	}
}
