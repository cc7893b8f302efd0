package keys_test

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"gatehouse/actors"
	"gatehouse/actors/accounts"
	"gatehouse/actors/actorstest"
	"gatehouse/actors/keys"
)

func TestAuthorizeErrors(t *testing.T) {
	n := actorstest.New(t)
	s := n.Start()
	u := mustUser(t, s, "a@example.com", accounts.PlanStandard, true)
	_, secret := mustKey(t, s, u, "k")
	tests := []struct {
		name   string
		secret string
		want   error
	}{
		{"missing", "", keys.ErrKeyMissing},
		{"malformed", "svc_live_short", keys.ErrKeyInvalid},
		{"wrong prefix", "svc_test_" + secret[9:], keys.ErrKeyInvalid},
		{"bad character", secret[:len(secret)-1] + "!", keys.ErrKeyInvalid},
		{"unknown", secret[:len(secret)-1] + flip(secret[len(secret)-1]), keys.ErrKeyInvalid},
		{"good", secret, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := s.Authorize(ctx(t), []byte(tt.secret)).Err; !errors.Is(got, tt.want) {
				t.Errorf("Authorize(%q) = %v, want %v", tt.secret, got, tt.want)
			}
		})
	}
}

func flip(c byte) string {
	if c == 'a' {
		return "b"
	}
	return "a"
}

func TestKeyFormatAndPreview(t *testing.T) {
	n := actorstest.New(t)
	s := n.Start()
	u := mustUser(t, s, "a@example.com", accounts.PlanPremium, true)
	k, secret := mustKey(t, s, u, "k")
	if !keys.WellFormed(secret) || !strings.HasPrefix(secret, "svc_live_") || len(secret) != 41 {
		t.Fatalf("secret %q is not svc_live_ + 32 alphanumerics", secret)
	}
	if k.RateLimit != 10000 {
		t.Errorf("premium key RateLimit = %d, want 10000", k.RateLimit)
	}
	if want := "svc_live_" + secret[9:13] + "…" + secret[37:]; k.Preview != want {
		t.Errorf("Preview = %q, want %q", k.Preview, want)
	}
	if k.Prefix != "svc_live" || !k.IsActive || !k.CreatedAt.Equal(t0) {
		t.Errorf("info = %+v", k)
	}
}

func TestCreateKeyValidation(t *testing.T) {
	n := actorstest.New(t)
	s := n.Start()
	licensed := mustUser(t, s, "a@example.com", accounts.PlanStandard, true)
	unlicensed := mustUser(t, s, "b@example.com", accounts.PlanStandard, false)
	tests := []struct {
		name string
		k    keys.NewKey
		want error
	}{
		{"empty name", keys.NewKey{Owner: s.KeyOwner(licensed), Name: ""}, actors.ErrInvalidArgument},
		{"blank name", keys.NewKey{Owner: s.KeyOwner(licensed), Name: "   "}, actors.ErrInvalidArgument},
		{"101 runes", keys.NewKey{Owner: s.KeyOwner(licensed), Name: strings.Repeat("é", 101)}, actors.ErrInvalidArgument},
		{"100 runes", keys.NewKey{Owner: s.KeyOwner(licensed), Name: strings.Repeat("é", 100)}, nil},
		{"past expiry", keys.NewKey{Owner: s.KeyOwner(licensed), Name: "x", ExpiresAt: t0.Add(-time.Second)}, actors.ErrInvalidArgument},
		{"no license", keys.NewKey{Owner: s.KeyOwner(unlicensed), Name: "x"}, keys.ErrLicenseRequired},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, _, err := s.CreateKey(ctx(t), tt.k); !errors.Is(err, tt.want) {
				t.Errorf("CreateKey() = %v, want %v", err, tt.want)
			}
		})
	}
}

func TestRateLimitAndValidate(t *testing.T) {
	n := actorstest.New(t)
	s := n.Start()
	u := mustUser(t, s, "a@example.com", accounts.PlanStandard, true)
	k, secret := mustKey(t, s, u, "k")
	setLimit(t, s, k, 3)
	if got := authN(t, s, secret, 5); got != 3 {
		t.Fatalf("admitted %d of 5 with limit 3", got)
	}
	r := s.Authorize(ctx(t), []byte(secret))
	if !errors.Is(r.Err, keys.ErrRateLimited) || r.Limit.RetryAfter != 3600 || r.Limit.Remaining != 0 {
		t.Fatalf("over limit: %+v", r)
	}
	v := s.Validate(ctx(t), []byte(secret))
	if v.Err != nil || v.UserID != u.ID || !v.IsActive {
		t.Fatalf("Validate = %+v", v)
	}
	n.Clock.Advance(3600 * time.Second)
	if got := authN(t, s, secret, 4); got != 3 {
		t.Errorf("an hour later admitted %d, want 3", got)
	}
	if us := usageOf(t, s, k); us.Total != 6 || us.Used != 3 || us.Limit != 3 {
		t.Errorf("usage = %+v, want total 6, used 3", us)
	}
}

func TestRotation(t *testing.T) {
	n := actorstest.New(t)
	s := n.Start()
	u := mustUser(t, s, "a@example.com", accounts.PlanStandard, true)
	k, old := mustKey(t, s, u, "k")
	setLimit(t, s, k, 4)
	authN(t, s, old, 2)
	info, fresh, err := s.RotateKey(ctx(t), k.ID)
	if err != nil {
		t.Fatal(err)
	}
	if info.ID != k.ID || fresh == old || !info.RotatedAt.Equal(t0) || !info.GraceEndsAt.Equal(t0.Add(24*time.Hour)) {
		t.Fatalf("rotated info = %+v", info)
	}
	// Shared window: 2 used before, 2 more allowed across both secrets.
	if got := authN(t, s, fresh, 1) + authN(t, s, old, 3); got != 2 {
		t.Errorf("after rotation admitted %d, want 2 (window shared)", got)
	}
	n.Clock.Advance(24 * time.Hour)
	if err := s.Authorize(ctx(t), []byte(old)).Err; !errors.Is(err, keys.ErrKeyExpired) {
		t.Errorf("old secret after grace: %v, want ErrKeyExpired", err)
	}
	if err := s.Authorize(ctx(t), []byte(fresh)).Err; err != nil {
		t.Errorf("new secret: %v", err)
	}
	// Rotating again drops the first secret altogether.
	_, third, err := s.RotateKey(ctx(t), k.ID)
	if err != nil {
		t.Fatal(err)
	}
	// RotateKey returns once the directory shards applied the change, so
	// the first secret's entry is gone now (not merely refused by the key).
	if keys.InDirectory(t, s.Keys, old) {
		t.Error("first secret still in the directory after the second rotation")
	}
	if !keys.InDirectory(t, s.Keys, fresh) || !keys.InDirectory(t, s.Keys, third) {
		t.Error("a secret within its grace period is missing from the directory")
	}
	if err := s.Authorize(ctx(t), []byte(old)).Err; !errors.Is(err, keys.ErrKeyInvalid) {
		t.Errorf("first secret after second rotation: %v, want ErrKeyInvalid", err)
	}
	for _, sec := range []string{fresh, third} {
		if err := s.Validate(ctx(t), []byte(sec)).Err; err != nil {
			t.Errorf("Validate(rotated secret) = %v", err)
		}
	}
	if us := usageOf(t, s, k); us.Total != 5 {
		t.Errorf("usage total = %d, want 5 (shared across secrets)", us.Total)
	}
}

func TestRevokeDeleteExpire(t *testing.T) {
	n := actorstest.New(t)
	s := n.Start()
	u := mustUser(t, s, "a@example.com", accounts.PlanStandard, true)
	k, old := mustKey(t, s, u, "k")
	_, fresh, _ := s.RotateKey(ctx(t), k.ID)
	if err := s.RevokeKey(ctx(t), k.ID); err != nil {
		t.Fatal(err)
	}
	for _, sec := range []string{old, fresh} {
		if err := s.Authorize(ctx(t), []byte(sec)).Err; !errors.Is(err, keys.ErrKeyRevoked) {
			t.Errorf("revoked key: %v, want ErrKeyRevoked", err)
		}
	}
	if _, _, err := s.RotateKey(ctx(t), k.ID); !errors.Is(err, keys.ErrKeyInactive) {
		t.Errorf("rotate revoked: %v, want ErrKeyInactive", err)
	}
	if info, _ := s.GetKey(ctx(t), k.ID); info.IsActive {
		t.Error("revoked key IsActive")
	}
	if err := s.DeleteKey(ctx(t), k.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetKey(ctx(t), k.ID); !errors.Is(err, keys.ErrKeyNotFound) {
		t.Errorf("GetKey(deleted) = %v", err)
	}
	if err := s.Authorize(ctx(t), []byte(fresh)).Err; !errors.Is(err, keys.ErrKeyInvalid) {
		t.Errorf("deleted key: %v, want ErrKeyInvalid", err)
	}
	for _, sec := range []string{old, fresh} {
		if keys.InDirectory(t, s.Keys, sec) {
			t.Error("a deleted key's secret is still in the directory")
		}
	}
	if _, _, err := s.RotateKey(ctx(t), uuid.New()); !errors.Is(err, keys.ErrKeyNotFound) {
		t.Errorf("rotate unknown: %v", err)
	}

	k2, sec2, err := s.CreateKey(ctx(t), keys.NewKey{Owner: s.KeyOwner(u), Name: "exp", ExpiresAt: t0.Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if !k2.ExpiresAt.Equal(t0.Add(time.Hour)) {
		t.Errorf("ExpiresAt = %v", k2.ExpiresAt)
	}
	n.Clock.Advance(time.Hour)
	if err := s.Authorize(ctx(t), []byte(sec2)).Err; !errors.Is(err, keys.ErrKeyExpired) {
		t.Errorf("expired key: %v, want ErrKeyExpired", err)
	}
}

func TestListKeysOwnership(t *testing.T) {
	n := actorstest.New(t)
	s := n.Start()
	a := mustUser(t, s, "a@example.com", accounts.PlanStandard, true)
	b := mustUser(t, s, "b@example.com", accounts.PlanStandard, true)
	var want []uuid.UUID
	for i := range 5 {
		k, secret := mustKey(t, s, a, "a")
		want = append([]uuid.UUID{k.ID}, want...)
		if i%2 == 0 {
			authN(t, s, secret, 1) // live actor: listed through it
		}
		n.Clock.Advance(time.Second)
	}
	mustKey(t, s, b, "b")
	got, err := s.ListKeys(ctx(t), a.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("ListKeys = %d keys, want %d", len(got), len(want))
	}
	for i := range got {
		if got[i].ID != want[i] {
			t.Errorf("ListKeys()[%d] = %s, want %s (newest first)", i, got[i].ID, want[i])
		}
	}
}

func TestConcurrentAuthorizeCountsExactly(t *testing.T) {
	n := actorstest.New(t)
	s := n.Start()
	u := mustUser(t, s, "a@example.com", accounts.PlanStandard, true)
	const nkeys, workers, per = 4, 32, 100
	var secrets []string
	var infos []keys.KeyInfo
	for range nkeys {
		k, sec := mustKey(t, s, u, "k")
		setLimit(t, s, k, 500)
		secrets, infos = append(secrets, sec), append(infos, k)
	}
	var wg sync.WaitGroup
	admitted := make([]int, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range per {
				if s.Authorize(ctx(t), []byte(secrets[(w+i)%nkeys])).Err == nil {
					admitted[w]++
				}
			}
		}()
	}
	wg.Wait()
	total := 0
	for _, n := range admitted {
		total += n
	}
	if total != nkeys*500 {
		t.Errorf("admitted %d, want %d (limit 500 x %d keys)", total, nkeys*500, nkeys)
	}
	var counted int64
	for _, k := range infos {
		counted += usageOf(t, s, k).Total
	}
	if counted != int64(total) {
		t.Errorf("usage counted %d, admitted %d", counted, total)
	}
}

func TestUsageDayBoundaries(t *testing.T) {
	n := actorstest.New(t)
	s := n.Start()
	u := mustUser(t, s, "a@example.com", accounts.PlanStandard, true)
	k, secret := mustKey(t, s, u, "k")
	midnight := time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC)
	n.Clock.Set(midnight.Add(-time.Second)) // 23:59:59 on the 22nd
	authN(t, s, secret, 2)
	n.Clock.Set(midnight) // 00:00:00 on the 23rd
	authN(t, s, secret, 3)
	n.Clock.Set(midnight.Add(30 * 24 * time.Hour)) // 30 days later
	authN(t, s, secret, 1)
	tests := []struct {
		days int
		want map[string]int64 // days not listed must be 0
	}{
		{1, map[string]int64{"2026-12-23": 1}},
		{30, map[string]int64{"2026-12-23": 1}}, // Nov 22 and 23 fell out
	}
	for _, tt := range tests {
		us, err := s.KeyUsage(ctx(t), k.ID, tt.days)
		if err != nil {
			t.Fatal(err)
		}
		if len(us.Daily) != tt.days || us.Daily[len(us.Daily)-1].Date != "2026-12-23" {
			t.Fatalf("KeyUsage(%d): %d entries ending %v", tt.days, len(us.Daily), us.Daily[len(us.Daily)-1])
		}
		if tt.days == 30 && us.Daily[0].Date != "2026-11-24" {
			t.Errorf("30 days start at %s, want 2026-11-24 (oldest first)", us.Daily[0].Date)
		}
		for _, d := range us.Daily {
			if d.Count != tt.want[d.Date] {
				t.Errorf("KeyUsage(%d) %s = %d, want %d", tt.days, d.Date, d.Count, tt.want[d.Date])
			}
		}
		if us.Total != 6 {
			t.Errorf("total = %d, want 6", us.Total)
		}
	}
	for _, bad := range []int{0, 31, -1} {
		if _, err := s.KeyUsage(ctx(t), k.ID, bad); !errors.Is(err, actors.ErrInvalidArgument) {
			t.Errorf("KeyUsage(days=%d) = %v, want actors.ErrInvalidArgument", bad, err)
		}
	}
}
