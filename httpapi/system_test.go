package httpapi

import (
	"context"
	"fmt"
	"sync/atomic"

	"gatehouse/actors"
	"gatehouse/actors/accounts"
	"gatehouse/actors/actorstest"
	"gatehouse/actors/clock"
	"gatehouse/actors/control"
	"gatehouse/actors/keys"
)

// testSystem is the real actor system on a temp dir (actorstest: WAL
// through waltest, a fake clock at actorstest.T0) behind the Server's
// KeyService and UserService, with a switch that makes the calls a request
// starts with (sessions, authorize, validate) fail as an overloaded system
// would.
type testSystem struct {
	actorstest.System
	clk  *clock.Fake
	node *actorstest.Node
	ctl  *control.Control // the running system's automation extension
	down atomic.Bool
}

var (
	_ KeyService  = (*testSystem)(nil)
	_ UserService = (*testSystem)(nil)
)

func (s *testSystem) setUnavailable(v bool) { s.down.Store(v) }

func (s *testSystem) unavailable() error {
	if s.down.Load() {
		return fmt.Errorf("test: system down: %w", actors.ErrUnavailable)
	}
	return nil
}

// Authenticate fails while the system is down.
func (s *testSystem) Authenticate(ctx context.Context, token string) (accounts.User, error) {
	if err := s.unavailable(); err != nil {
		return accounts.User{}, err
	}
	return s.System.Authenticate(ctx, token)
}

// Authorize fails while the system is down.
func (s *testSystem) Authorize(ctx context.Context, secret []byte) keys.AuthResult {
	if err := s.unavailable(); err != nil {
		return keys.AuthResult{Err: err}
	}
	return s.System.Authorize(ctx, secret)
}

// Validate fails while the system is down.
func (s *testSystem) Validate(ctx context.Context, secret []byte) keys.AuthResult {
	if err := s.unavailable(); err != nil {
		return keys.AuthResult{Err: err}
	}
	return s.System.Validate(ctx, secret)
}
