package accounts

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"

	"gatehouse/actors"
)

const (
	minPasswordLen = 8
	maxPasswordLen = 1024
	maxEmailLen    = 254
)

func validateEmail(e string) (string, error) {
	e = normalizeEmail(e)
	at := strings.IndexByte(e, '@')
	if len(e) > maxEmailLen || at < 1 || at == len(e)-1 || strings.ContainsAny(e, " \t\r\n") {
		return "", fmt.Errorf("email must be an address like name@example.com: %w", actors.ErrInvalidArgument)
	}
	return e, nil
}

func validatePassword(pw string) error {
	if n := len(pw); n < minPasswordLen || n > maxPasswordLen {
		return fmt.Errorf("password must be %d-%d bytes: %w", minPasswordLen, maxPasswordLen, actors.ErrInvalidArgument)
	}
	return nil
}

func (u userRecord) user() User {
	return User{
		ID: u.ID, Email: u.Email, Role: u.Role, Plan: u.Plan, LicenseActive: u.LicenseActive,
		CreatedAt: time.Unix(u.CreatedAt, 0).UTC(), PasswordHash: u.PasswordHash, KeyRateLimit: u.KeyRateLimit,
	}
}

func (s *Service) askUser(ctx context.Context, msg any, reply chan userReply) (userReply, error) {
	s.root.Send(s.pid, msg)
	r, err := await(ctx, reply)
	if err != nil {
		return r, err
	}
	return r, r.err
}

// CreateUser registers a user. ErrEmailTaken if the email is in use.
func (s *Service) CreateUser(ctx context.Context, nu NewUser) (User, error) {
	email, err := validateEmail(nu.Email)
	if err != nil {
		return User{}, err
	}
	if err := validatePassword(nu.Password); err != nil {
		return User{}, err
	}
	if nu.Role == "" {
		nu.Role = RoleUser
	}
	if nu.Plan == "" {
		nu.Plan = PlanStandard
	}
	if !nu.Role.Valid() {
		return User{}, fmt.Errorf(`role must be "user" or "admin": %w`, actors.ErrInvalidArgument)
	}
	if !nu.Plan.Valid() {
		return User{}, fmt.Errorf(`plan must be "standard" or "premium": %w`, actors.ErrInvalidArgument)
	}
	ph, err := s.hashWithSlot(ctx, nu.Password)
	if err != nil {
		return User{}, err
	}
	rec := userRecord{
		ID: uuid.New(), Email: email, Role: nu.Role, Plan: nu.Plan, LicenseActive: nu.LicenseActive,
		CreatedAt: s.clock.Now().Unix(),
	}
	if rec.PasswordHash, err = s.sealPasswordHash(ph, rec.ID); err != nil {
		return User{}, err
	}
	// In a cluster, one creation per email at a time, each seeing every
	// earlier one: two nodes never both take an email.
	unlock, err := s.lock(ctx, "email/"+email)
	if err != nil {
		return User{}, fmt.Errorf("create user: %w", err)
	}
	defer unlock()
	reply := make(chan userReply, 1)
	r, err := s.askUser(ctx, putUser{rec: rec, reply: reply}, reply)
	if err != nil {
		return User{}, fmt.Errorf("create user: %w", err)
	}
	return r.user.user(), nil
}

// UpdateUser changes a user's plan, license, role or password.
func (s *Service) UpdateUser(ctx context.Context, id uuid.UUID, p UserPatch) (User, error) {
	m := patchUser{id: id, plan: p.Plan, license: p.LicenseActive, role: p.Role, keyLimit: p.KeyRateLimit, reply: make(chan userReply, 1)}
	if p.KeyRateLimit != nil && (*p.KeyRateLimit < 0 || *p.KeyRateLimit > maxRateLimit) {
		return User{}, fmt.Errorf("keyRateLimit must be an integer in 0..%d (0: the plan's): %w", maxRateLimit, actors.ErrInvalidArgument)
	}
	if p.KeyRateLimitCap != nil && (*p.KeyRateLimitCap < 1 || *p.KeyRateLimitCap > maxRateLimit) {
		return User{}, fmt.Errorf("rateLimit must be an integer in 1..%d: %w", maxRateLimit, actors.ErrInvalidArgument)
	}
	m.keyCap, m.plans = p.KeyRateLimitCap, s.cfg.Plans
	if p.Plan != nil && !p.Plan.Valid() {
		return User{}, fmt.Errorf(`plan must be "standard" or "premium": %w`, actors.ErrInvalidArgument)
	}
	if p.Role != nil && !p.Role.Valid() {
		return User{}, fmt.Errorf(`role must be "user" or "admin": %w`, actors.ErrInvalidArgument)
	}
	if p.Password != nil {
		if err := validatePassword(*p.Password); err != nil {
			return User{}, err
		}
		ph, err := s.hashWithSlot(ctx, *p.Password)
		if err != nil {
			return User{}, err
		}
		if m.passwordHash, err = s.sealPasswordHash(ph, id); err != nil {
			return User{}, err
		}
	}
	// In a cluster, one change of a user at a time, each on a state that
	// holds the previous one: racing patches of two fields keep both.
	unlock, err := s.lock(ctx, "user/"+id.String())
	if err != nil {
		return User{}, fmt.Errorf("update user %s: %w", id, err)
	}
	defer unlock()
	if err := s.revokeBefore(ctx, id, p); err != nil { // the access tokens end with the sessions
		return User{}, fmt.Errorf("update user %s: %w", id, err)
	}
	r, err := s.askUser(ctx, m, m.reply)
	if err != nil {
		return User{}, fmt.Errorf("update user %s: %w", id, err)
	}
	if r.ended { // again: one made meanwhile, or a change revokeBefore did not foresee
		if err := s.revokeCredentials(ctx, id); err != nil {
			return User{}, fmt.Errorf("update user %s: %w", id, err)
		}
	}
	return r.user.user(), nil
}

// GetUser returns one user. ErrUserNotFound if there is none.
func (s *Service) GetUser(ctx context.Context, id uuid.UUID) (User, error) {
	reply := make(chan userReply, 1)
	r, err := s.askUser(ctx, getUser{id: id, reply: reply}, reply)
	return r.user.user(), err
}

// ListUsers returns every user, oldest first.
func (s *Service) ListUsers(ctx context.Context) ([]User, error) {
	reply := make(chan userReply, 1)
	r, err := s.askUser(ctx, listUsers{reply: reply}, reply)
	if err != nil {
		return nil, err
	}
	out := make([]User, len(r.users))
	for i, u := range r.users {
		out[i] = u.user()
	}
	return out, nil
}

// Login checks a password and opens a session. ErrBadCredentials when the
// email is unknown or the password wrong (indistinguishable, in time too).
func (s *Service) Login(ctx context.Context, email, password string) (User, Session, error) {
	return s.LoginFrom(ctx, email, password, "")
}

// LoginFrom is Login for a client at ip (without port), which failed
// logins are also counted against. Besides Login's errors: a
// *ThrottledError (ErrLoginThrottled) after too many failures, ErrBusy
// when every password-hashing slot is taken (see login.go).
func (s *Service) LoginFrom(ctx context.Context, email, password, ip string) (User, Session, error) {
	email = normalizeEmail(email)
	now := s.clock.Now().Unix()
	reply := make(chan loginBeginReply, 1)
	s.root.Send(s.pid, loginBegin{email: email, ip: ip, now: now, reply: reply})
	lb, err := await(ctx, reply)
	if err != nil {
		return User{}, Session{}, fmt.Errorf("login: %w", err)
	}
	if lb.wait > 0 {
		return User{}, Session{}, &ThrottledError{RetryAfter: lb.wait}
	}
	ok := false
	defer func() { s.root.Send(s.pid, loginEnd{email: email, ip: ip, ok: ok, now: s.clock.Now().Unix()}) }()
	if len(password) > maxPasswordLen {
		return User{}, Session{}, ErrBadCredentials // never hashed: no password is this long
	}
	release, err := s.hashSlot(ctx)
	if err != nil {
		ok = true // not the client's failure: do not count it
		return User{}, Session{}, err
	}
	stored, oerr := dummyHash(), error(nil)
	if lb.found {
		if stored, oerr = s.openPasswordHash(lb.user.PasswordHash, lb.user.ID); oerr != nil {
			s.lg.Warn("login: the user's password hash does not open with the master key", "user_id", lb.user.ID, "err", oerr)
			stored = dummyHash() // as long as any other failure
		}
	}
	match, herr := checkPassword(stored, password)
	if oerr != nil {
		herr = oerr
	}
	release()
	if !lb.found || herr != nil || !match {
		return User{}, Session{}, ErrBadCredentials
	}
	ok = true
	var raw [32]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return User{}, Session{}, fmt.Errorf("session token: %w", err)
	}
	token := base64.RawURLEncoding.EncodeToString(raw[:])
	exp := s.clock.Now().Add(s.cfg.SessionTTL)
	rec := sessionRecord{Hash: sha256.Sum256([]byte(token)), UserID: lb.user.ID, ExpiresAt: exp.Unix()}
	// Under the user's lock in a cluster, so that a logout-all on another
	// node either sees this session or comes after it.
	unlock, err := s.lock(ctx, "user/"+lb.user.ID.String())
	if err != nil {
		return User{}, Session{}, fmt.Errorf("login: %w", err)
	}
	defer unlock()
	errc := make(chan error, 1)
	s.root.Send(s.pid, putSession{rec: rec, reply: errc})
	if err, werr := await(ctx, errc); err != nil || werr != nil {
		return User{}, Session{}, fmt.Errorf("login: %w", firstErr(werr, err))
	}
	return lb.user.user(), Session{Token: token, UserID: lb.user.ID, ExpiresAt: time.Unix(rec.ExpiresAt, 0).UTC()}, nil
}

// LogoutAll ends every session of user (after a suspected compromise,
// from POST /api/auth/logout-all) and every other credential of theirs
// (access tokens: CredentialRevoker).
func (s *Service) LogoutAll(ctx context.Context, user uuid.UUID) error {
	unlock, err := s.lock(ctx, "user/"+user.String())
	if err != nil {
		return fmt.Errorf("logout all: %w", err)
	}
	defer unlock()
	if err := s.revokeCredentials(ctx, user); err != nil { // before, then again for one made meanwhile
		return fmt.Errorf("logout all: %w", err)
	}
	reply := make(chan userReply, 1)
	if _, err = s.askUser(ctx, logoutAll{user: user, reply: reply}, reply); err != nil {
		return err
	}
	if err := s.revokeCredentials(ctx, user); err != nil {
		return fmt.Errorf("logout all: %w", err)
	}
	return nil
}

// Authenticate resolves a session token to its user. ErrSessionInvalid if
// the token is unknown or expired.
func (s *Service) Authenticate(ctx context.Context, token string) (User, error) {
	if token == "" {
		return User{}, ErrSessionInvalid
	}
	reply := make(chan userReply, 1)
	m := getSession{hash: sha256.Sum256([]byte(token)), now: s.clock.Now().Unix(), reply: reply}
	r, err := s.askUser(ctx, m, reply)
	return r.user.user(), err
}

// Logout ends a session; an unknown token is not an error.
func (s *Service) Logout(ctx context.Context, token string) error {
	errc := make(chan error, 1)
	s.root.Send(s.pid, delSession{hash: sha256.Sum256([]byte(token)), reply: errc})
	err, werr := await(ctx, errc)
	return firstErr(werr, err)
}

// NewPassword returns a random password to show once: 18 bytes from
// crypto/rand, base64url (24 characters).
func NewPassword() (string, error) {
	var raw [18]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(raw[:]), nil
}

// EnsureAdmin creates an admin with email unless a user with that email
// exists. An empty password is replaced by a generated one, returned so
// the caller can show it once.
func (s *Service) EnsureAdmin(ctx context.Context, email, password string) (created bool, generated string, err error) {
	reply := make(chan userReply, 1)
	if _, err := s.askUser(ctx, getUser{email: email, reply: reply}, reply); err == nil {
		return false, "", nil
	}
	if password == "" {
		if password, err = NewPassword(); err != nil {
			return false, "", fmt.Errorf("admin password: %w", err)
		}
		generated = password
	}
	_, err = s.CreateUser(ctx, NewUser{Email: email, Password: password, Role: RoleAdmin, Plan: PlanPremium, LicenseActive: true})
	if err != nil {
		return false, "", fmt.Errorf("bootstrap admin: %w", err)
	}
	return true, generated, nil
}

func firstErr(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

// UserByEmail finds a user by email; ErrUserNotFound.
func (s *Service) UserByEmail(ctx context.Context, email string) (User, error) {
	reply := make(chan userReply, 1)
	r, err := s.askUser(ctx, getUser{email: email, reply: reply}, reply)
	if err != nil {
		return User{}, err
	}
	return r.user.user(), nil
}
