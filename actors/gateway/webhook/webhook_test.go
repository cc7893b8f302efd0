package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"go.uber.org/goleak"

	"gatehouse/actors/gateway"
	"gatehouse/actors/gateway/agentrun"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const secret = "s3cret-0123456789abcdef"

// fakeChannels holds one webhook instance; its clock stands still.
type fakeChannels struct {
	inst gateway.ChannelInstance
	now  time.Time
}

func (f *fakeChannels) ChannelCredentials(_ context.Context, ref string) (gateway.ChannelInstance, map[string]string, error) {
	if ref != f.inst.ID.String() {
		return gateway.ChannelInstance{}, nil, gateway.ErrNotFound
	}
	return f.inst, map[string]string{"secret": secret}, nil
}

func (f *fakeChannels) Now() time.Time { return f.now }

// fakeTurner answers every turn, and records the principal it ran for.
type fakeTurner struct {
	err  error
	seen atomic.Pointer[gateway.Principal]
}

func (f *fakeTurner) Turn(_ context.Context, p gateway.Principal, req agentrun.TurnRequest) (agentrun.TurnResult, error) {
	f.seen.Store(&p)
	return agentrun.TurnResult{Result: agentrun.Result{Content: "re: " + req.Messages[0].Content}, RunID: "r1", SessionKey: req.SessionKey}, f.err
}

func newService(t *testing.T, cfg Config, inst gateway.ChannelInstance, turns Turner) (*Service, *fakeChannels) {
	t.Helper()
	ch := &fakeChannels{inst: inst, now: time.Unix(1_800_000_000, 0)}
	s, err := New(cfg, ch, turns, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(context.Background()); err != nil {
			t.Error(err)
		}
	})
	return s, ch
}

func instance(config string) gateway.ChannelInstance {
	return gateway.ChannelInstance{ID: uuid.New(), Name: "support", ChannelType: gateway.ChannelWebhook, AgentID: uuid.New(),
		Enabled: true, Config: json.RawMessage(config)}
}

func TestVerify(t *testing.T) {
	inst := instance(`{}`)
	s, ch := newService(t, DefaultConfig(), inst, &fakeTurner{})
	now := ch.now.Unix()
	body := []byte(`{"sender_id":"u-1","message":"hi"}`)
	ts := func(t int64) string { return strconv.FormatInt(t, 10) }
	tests := []struct {
		name, ref, ts, sig string
		want               error
	}{
		{"signed", inst.ID.String(), ts(now), Sign(secret, now, body), nil},
		{"replayed", inst.ID.String(), ts(now), Sign(secret, now, body), ErrUnauthorized},
		{"stale", inst.ID.String(), ts(now - 6*60), Sign(secret, now-6*60, body), ErrUnauthorized},
		{"another secret", inst.ID.String(), ts(now + 1), Sign("other", now+1, body), ErrUnauthorized},
		{"no timestamp", inst.ID.String(), "", Sign(secret, now+2, body), ErrUnauthorized},
		{"unknown instance", "nope", ts(now + 3), Sign(secret, now+3, body), gateway.ErrNotFound},
	}
	for _, tt := range tests {
		_, err := s.Verify(context.Background(), tt.ref, tt.ts, tt.sig, body)
		if !errors.Is(err, tt.want) || (tt.want == nil) != (err == nil) {
			t.Errorf("%s: Verify() = %v, want %v", tt.name, err, tt.want)
		}
	}
}

// TestDeliverAsync: an async instance answers at once; the outcome is
// POSTed signed, retried after a failure; the sender runs the instance's
// agent only.
func TestDeliverAsync(t *testing.T) {
	var calls atomic.Int32
	got := make(chan string, 1)
	cb := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		ts, _ := strconv.ParseInt(r.Header.Get(HeaderTimestamp), 10, 64)
		if r.Header.Get(HeaderSignature) != Sign(secret, ts, b) {
			t.Errorf("callback signature %q does not verify", r.Header.Get(HeaderSignature))
		}
		if calls.Add(1) == 1 {
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		got <- string(b)
	}))
	defer cb.Close()
	cfg := DefaultConfig()
	cfg.CallbackRetry = time.Millisecond
	cfg.Code = func(error) string { return "AGENT_TIMEOUT" }
	inst := instance(`{"async":true,"callback_url":"` + cb.URL + `"}`)
	turns := &fakeTurner{err: errors.New("too slow")}
	s, ch := newService(t, cfg, inst, turns)
	body := []byte(`{}`)
	in, err := s.Verify(context.Background(), inst.ID.String(), strconv.FormatInt(ch.now.Unix(), 10), Sign(secret, ch.now.Unix(), body), body)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Deliver(context.Background(), in, "", "x"); !errors.Is(err, gateway.ErrInvalid) {
		t.Errorf("Deliver(no sender) = %v, want ErrInvalid", err)
	}
	out, err := s.Deliver(context.Background(), in, "u-7", "later")
	if err != nil || !out.Accepted {
		t.Fatalf("Deliver(async) = %+v, %v", out, err)
	}
	select {
	case b := <-got:
		if !strings.Contains(b, `"error":"AGENT_TIMEOUT"`) || !strings.Contains(b, `"session_key":"wh:`+inst.ID.String()+`:u-7"`) || calls.Load() != 2 {
			t.Errorf("callback = %s after %d calls", b, calls.Load())
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no callback")
	}
	if p := turns.seen.Load(); p == nil || p.User != gateway.ChannelUser(inst.ID, "u-7") || p.BoundAgent != inst.AgentID || p.Trusted {
		t.Errorf("turn ran for %+v, want the sender (in its instance's namespace) bound to the instance's agent", p)
	}
}

func TestConfigValidate(t *testing.T) {
	for name, edit := range map[string]func(*Config){
		"CallbackRetry":    func(c *Config) { c.CallbackRetry = -time.Second },
		"CallbackAttempts": func(c *Config) { c.CallbackAttempts = 0 },
		"CallbackTimeout":  func(c *Config) { c.CallbackTimeout = 0 },
		"MaxInFlight":      func(c *Config) { c.MaxInFlight = 0 },
	} {
		c := DefaultConfig()
		edit(&c)
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("Validate() with a bad %s = %v, want an error naming it", name, err)
		}
	}
	if err := DefaultConfig().Validate(); err != nil {
		t.Errorf("DefaultConfig().Validate() = %v", err)
	}
}

// blockingTurner holds every turn until release is closed.
type blockingTurner struct{ release chan struct{} }

func (b *blockingTurner) Turn(ctx context.Context, _ gateway.Principal, req agentrun.TurnRequest) (agentrun.TurnResult, error) {
	select {
	case <-b.release:
	case <-ctx.Done():
		return agentrun.TurnResult{}, ctx.Err()
	}
	return agentrun.TurnResult{Result: agentrun.Result{Content: "re: " + req.Messages[0].Content}, RunID: "r1", SessionKey: req.SessionKey}, nil
}

// TestDeliverAsyncBounded: an async instance takes MaxInFlight messages,
// then ErrBusy until one finishes (its callback delivered); the bound is
// per instance.
func TestDeliverAsyncBounded(t *testing.T) {
	delivered := make(chan struct{}, 10)
	cb := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { delivered <- struct{}{} }))
	defer cb.Close()
	cfg := DefaultConfig()
	cfg.MaxInFlight = 2
	inst := instance(`{"async":true,"callback_url":"` + cb.URL + `"}`)
	turns := &blockingTurner{release: make(chan struct{})}
	s, _ := newService(t, cfg, inst, turns)
	other := instance(`{"async":true,"callback_url":"` + cb.URL + `"}`)
	ctx := context.Background()
	for i := range 2 {
		if _, err := s.Deliver(ctx, Inbound{Instance: inst}, "u-"+strconv.Itoa(i), "m"); err != nil {
			t.Fatalf("Deliver #%d = %v", i, err)
		}
	}
	if _, err := s.Deliver(ctx, Inbound{Instance: inst}, "u-3", "m"); !errors.Is(err, ErrBusy) || !strings.Contains(err.Error(), "gateway.webhook_max_in_flight") {
		t.Errorf("Deliver beyond MaxInFlight = %v, want ErrBusy naming the setting", err)
	}
	if _, err := s.Deliver(ctx, Inbound{Instance: other}, "u-1", "m"); err != nil {
		t.Errorf("Deliver to another instance = %v, want accepted (the bound is per instance)", err)
	}
	close(turns.release)
	for range 3 {
		select {
		case <-delivered:
		case <-time.After(5 * time.Second):
			t.Fatal("no callback")
		}
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		_, err := s.Deliver(ctx, Inbound{Instance: inst}, "u-4", "m")
		if err == nil {
			break
		}
		if !errors.Is(err, ErrBusy) || time.Now().After(deadline) {
			t.Fatalf("Deliver once the callbacks were delivered = %v", err)
		}
	}
	<-delivered
}
