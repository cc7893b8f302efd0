package control

import (
	"context"
	"maps"
	"slices"
	"strings"

	"github.com/google/uuid"
)

// ListServices returns the API's services by name, headers in the clear
// (the caller masks them).
func (c *Control) ListServices() []Service {
	v := c.View()
	out := make([]Service, 0, len(v.Services))
	for _, name := range slices.Sorted(maps.Keys(v.Services)) {
		out = append(out, v.Services[name])
	}
	return out
}

// GetService returns one service; ErrServiceNotFound.
func (c *Control) GetService(name string) (Service, error) {
	s, ok := c.View().Services[name]
	if !ok {
		return Service{}, ErrServiceNotFound
	}
	return s, nil
}

// CreateService adds a service; ErrServiceExists if one has the name.
func (c *Control) CreateService(ctx context.Context, name string, in ServiceInput) (Service, error) {
	return c.putService(ctx, name, in, true)
}

// UpdateService replaces a service's fields; ErrServiceNotFound.
func (c *Control) UpdateService(ctx context.Context, name string, in ServiceInput) (Service, error) {
	return c.putService(ctx, name, in, false)
}

func (c *Control) putService(ctx context.Context, name string, in ServiceInput, create bool) (Service, error) {
	if name == "" {
		return Service{}, invalid("name is required")
	}
	sealed := map[string][]byte{}
	for k, v := range in.Headers {
		b, err := c.seal.Seal([]byte(v), headerAAD(name, k))
		if err != nil {
			return Service{}, err
		}
		sealed[k] = b
	}
	return call(ctx, c, func(a *ctlActor) (Service, error) {
		cur, exists := a.st.services[name]
		switch {
		case create && exists:
			return Service{}, ErrServiceExists
		case !create && !exists:
			return Service{}, ErrServiceNotFound
		}
		now := a.c.clock.Now().UnixNano()
		rec := serviceRec{
			Name: name, Upstream: in.Upstream, Headers: sealed, TimeoutMs: in.Timeout.Milliseconds(),
			MaxConns: in.MaxConns, Enabled: in.Enabled, Description: in.Description, CreatedAt: now, UpdatedAt: now,
		}
		if exists {
			rec.CreatedAt = cur.CreatedAt
			rec.UpdatedAt = max(now, cur.UpdatedAt+1) // a new value: views rebuild it
			if in.KeepHeaders {
				rec.Headers = cur.Headers
			}
		}
		if len(rec.Headers) == 0 {
			rec.Headers = nil
		}
		if err := a.commit(saved(kindService, name, rec)); err != nil {
			return Service{}, err
		}
		return a.c.view.Load().Services[name], nil
	})
}

// DeleteService removes a service; ErrServiceNotFound. Requests already
// admitted finish on it.
func (c *Control) DeleteService(ctx context.Context, name string) error {
	_, err := call(ctx, c, func(a *ctlActor) (struct{}, error) {
		if _, ok := a.st.services[name]; !ok {
			return struct{}{}, ErrServiceNotFound
		}
		return struct{}{}, a.commit(deleted(kindService, name))
	})
	return err
}

// SetKeyServices limits key to services (sorted, de-duplicated); an
// empty list lifts the limit (the key reaches every service again). The
// caller checked the names.
func (c *Control) SetKeyServices(ctx context.Context, key uuid.UUID, services []string) error {
	l := slices.Clone(services)
	slices.Sort(l)
	l = slices.Compact(l)
	_, err := call(ctx, c, func(a *ctlActor) (struct{}, error) {
		cur, had := a.st.keySvcs[key]
		if len(l) == 0 {
			if !had {
				return struct{}{}, nil
			}
			return struct{}{}, a.commit(deleted(kindKeyServices, key.String()))
		}
		if had && slices.Equal(cur, l) {
			return struct{}{}, nil
		}
		return struct{}{}, a.commit(saved(kindKeyServices, key.String(), keyServicesRec{KeyID: key, Services: l}))
	})
	return err
}

// Allowed reports whether a key limited to list may reach service name.
// It does not allocate.
func Allowed(list []string, name []byte) bool {
	for _, s := range list {
		if s == string(name) {
			return true
		}
	}
	return false
}

// MaskHeader is how an API shows a header value: its last four characters
// only when it is long enough for them not to give it away.
func MaskHeader(v string) string {
	if len(v) >= 16 {
		return strings.Repeat("•", 4) + v[len(v)-4:]
	}
	return strings.Repeat("•", 4)
}
