package httpapi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/valyala/fasthttp"

	"gatehouse/actors"
	"gatehouse/actors/accounts"
	"gatehouse/actors/keys"
)

func TestClassify(t *testing.T) {
	wrap := func(err error) error { return fmt.Errorf("shard 3: get key: %w", err) }
	tests := []struct {
		name   string
		err    error
		status int
		code   string
		msg    string // "" to skip
		unexp  bool
	}{
		{"missing key", keys.ErrKeyMissing, 401, codeMissingKey, "", false},
		{"invalid key", wrap(keys.ErrKeyInvalid), 401, codeInvalidKey, "", false},
		{"expired", wrap(keys.ErrKeyExpired), 401, codeKeyExpired, "", false},
		{"revoked", wrap(keys.ErrKeyRevoked), 401, codeKeyRevoked, "", false},
		{"rate limited", wrap(keys.ErrRateLimited), 429, codeRateLimited, "", false},
		{"key not found", wrap(keys.ErrKeyNotFound), 404, codeKeyNotFound, "", false},
		{"inactive", wrap(keys.ErrKeyInactive), 400, codeKeyInactive, "", false},
		{"license", wrap(keys.ErrLicenseRequired), 403, codeLicenseRequired, "", false},
		{"user not found", wrap(accounts.ErrUserNotFound), 404, codeNotFound, "", false},
		{"email taken", wrap(accounts.ErrEmailTaken), 409, codeEmailTaken, "", false},
		{"bad credentials", accounts.ErrBadCredentials, 401, codeInvalidCreds, "", false},
		{"session", accounts.ErrSessionInvalid, 401, codeUnauthorized, "", false},
		{"unavailable", wrap(actors.ErrUnavailable), 503, codeUnavailable, "", false},
		{"deadline", wrap(context.DeadlineExceeded), 503, codeUnavailable, "", false},
		{"invalid argument", fmt.Errorf("create key: name must be 1-100 characters: %w", actors.ErrInvalidArgument),
			400, codeValidation, "create key: name must be 1-100 characters", false},
		{"bare invalid argument", actors.ErrInvalidArgument, 400, codeValidation, "invalid argument", false},
		{"upstream refused", &upstreamError{&upstream{name: "llm"}, &net.OpError{Op: "dial", Err: errors.New("connection refused")}},
			502, codeUpstreamDown, "upstream llm is unavailable", false},
		{"upstream timeout", &upstreamError{&upstream{name: "llm"}, fasthttp.ErrTimeout}, 504, codeUpstreamTimeout, "", false},
		{"upstream dial timeout", &upstreamError{&upstream{name: "llm"}, fasthttp.ErrDialTimeout}, 504, codeUpstreamTimeout, "", false},
		{"upstream no conns", &upstreamError{&upstream{name: "llm"}, fasthttp.ErrNoFreeConns}, 504, codeUpstreamTimeout, "", false},
		{"api error", invalidField("days", "must be %d", 1), 400, codeValidation, "days must be 1", false},
		{"unexpected", errors.New("disk on fire"), 500, codeInternal, "internal error", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, code, msg, unexp := classify(tt.err)
			if status != tt.status || code != tt.code || unexp != tt.unexp || (tt.msg != "" && msg != tt.msg) {
				t.Errorf("classify(%v) = %d, %s, %q, %v; want %d, %s, %q, %v",
					tt.err, status, code, msg, unexp, tt.status, tt.code, tt.msg, tt.unexp)
			}
		})
	}
}

// brokenKeys fails GetKey with an unexpected error that carries a secret.
type brokenKeys struct{ *testSystem }

func (brokenKeys) GetKey(context.Context, uuid.UUID) (keys.KeyInfo, error) {
	return keys.KeyInfo{}, errors.New("decrypt svc_live_SECRETSECRETSECRETSECRETSECRET12: bad tag")
}

func TestInternalErrorIsLoggedOnceWithoutLeaking(t *testing.T) {
	var logs syncBuffer
	e := newTestEnv(t, withoutControl(), withLogger(slog.New(slog.NewTextHandler(&logs, nil))),
		withKeyService(func(sys *testSystem) KeyService { return brokenKeys{sys} }))
	e.addUser(t, "a@example.com", accounts.RoleUser, accounts.PlanStandard, true)
	ck := e.login(t, "a@example.com")
	r := e.do(t, request{method: "GET", path: "/api/keys/" + uuid.NewString(), cookie: ck})
	mustStatus(t, r, 500, codeInternal)
	if strings.Contains(string(r.body), "SECRET") {
		t.Errorf("500 body leaks the error: %s", r.body)
	}
	if n := strings.Count(logs.String(), "request failed"); n != 1 {
		t.Errorf("logged %d times, want once:\n%s", n, logs.String())
	}
	if strings.Contains(logs.String(), "SECRET") {
		t.Errorf("log leaks an API key:\n%s", logs.String())
	}
}

func TestServerErrorTimeoutIs408(t *testing.T) {
	s := NewHealthServer("api", nil, nil, nil)
	tests := []struct {
		name string
		err  error
		want int
	}{
		{"read timeout", &net.OpError{Op: "read", Err: os.ErrDeadlineExceeded}, fasthttp.StatusRequestTimeout},
		{"garbage", errors.New("cannot parse request"), fasthttp.StatusBadRequest},
		{"too large", fasthttp.ErrBodyTooLarge, fasthttp.StatusRequestEntityTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var rc fasthttp.RequestCtx
			s.serverError(&rc, tt.err)
			if got := rc.Response.StatusCode(); got != tt.want {
				t.Errorf("serverError(%v) status = %d, want %d", tt.err, got, tt.want)
			}
		})
	}
}
