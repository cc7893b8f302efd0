package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/valyala/fasthttp"

	"gatehouse/actors/accounts"
	"gatehouse/actors/control"
)

// Services through the API: GET/POST /api/services and GET/PUT/DELETE
// /api/services/{name} (admin). The config file's services are listed
// too, read-only. A change is durable (actors/control) and the proxy's
// table is rebuilt before it is acknowledged, so the next proxied request
// uses it; a request already admitted holds its *upstream and finishes on
// the service it started on.

// serviceTable is what the proxy serves: every service by name, and the
// 404 that names them. Never changed once published.
type serviceTable struct {
	byName     map[string]*upstream
	errUnknown *apiError
	// api records, per API service, the version each upstream was built
	// from (so an unchanged service keeps its connections).
	api map[string]time.Time
}

// rebuildServices publishes a new table from the config's services and
// v's (nil: config only). A service of the API that a config service
// shadows is ignored (the API refuses to create one, but a config file
// may gain the name later).
func (s *Server) rebuildServices(v *control.View) {
	s.tableMu.Lock()
	defer s.tableMu.Unlock()
	old := s.table.Load()
	t := &serviceTable{byName: maps.Clone(s.config), api: map[string]time.Time{}}
	if v != nil {
		for name, svc := range v.Services {
			if _, shadowed := s.config[name]; shadowed {
				continue
			}
			if old != nil && old.api[name].Equal(svc.UpdatedAt) && old.byName[name] != nil {
				t.byName[name], t.api[name] = old.byName[name], svc.UpdatedAt
				continue
			}
			if !s.cfg.AllowLinkLocal && linkLocalUpstream(svc.Upstream) { // saved before the rule
				s.lg.Warn("service points at a link-local address: every request to it is refused (server.services_allow_link_local)", "service", name, "upstream", svc.Upstream)
			}
			up, err := newUpstream(name, Service{Upstream: svc.Upstream, Headers: svc.Headers, Timeout: svc.Timeout, MaxConns: svc.MaxConns, noLinkLocal: !s.cfg.AllowLinkLocal})
			if err != nil { // validated when it was saved: only a config change of the rules gets here
				s.lg.Warn("service not served", "service", name, "err", err)
				continue
			}
			up.disabled = !svc.Enabled
			t.byName[name], t.api[name] = up, svc.UpdatedAt
		}
	}
	names := slices.Sorted(maps.Keys(t.byName))
	msg := "unknown service: none is configured (see \"services\" in the README)"
	if len(names) > 0 {
		msg = "unknown service: configured services are " + strings.Join(names, ", ")
	}
	t.errUnknown = &apiError{errUnknownService.status, errUnknownService.code, msg}
	s.table.Store(t)
	if old != nil {
		for name, up := range old.byName {
			if t.byName[name] != up {
				// Replaced or removed: requests in flight keep their
				// connections; idle ones go now.
				up.pool.Close()
			}
		}
	}
}

// serviceView is a service as the API shows it: header values masked.
type serviceView struct {
	Name        string            `json:"name"`
	Upstream    string            `json:"upstream"`
	Headers     map[string]string `json:"headers"`
	TimeoutMs   int64             `json:"timeoutMs"`
	MaxConns    int               `json:"maxConns"`
	Enabled     bool              `json:"enabled"`
	Description string            `json:"description"`
	// Source is "config" (the config file: read-only here) or "api".
	Source    string  `json:"source"`
	ReadOnly  bool    `json:"readOnly"`
	CreatedAt isoTime `json:"createdAt"`
	UpdatedAt isoTime `json:"updatedAt"`
}

type servicesBody struct {
	Services []serviceView `json:"services"`
}

type serviceBody struct {
	Service serviceView `json:"service"`
}

func maskHeaders(h map[string]string) map[string]string {
	out := make(map[string]string, len(h))
	for k, v := range h {
		out[k] = control.MaskHeader(v)
	}
	return out
}

func configServiceView(name string, svc Service) serviceView {
	return serviceView{
		Name: name, Upstream: svc.Upstream, Headers: maskHeaders(svc.Headers), TimeoutMs: svc.Timeout.Milliseconds(),
		MaxConns: svc.MaxConns, Enabled: true, Source: "config", ReadOnly: true,
	}
}

func apiServiceView(svc control.Service) serviceView {
	return serviceView{
		Name: svc.Name, Upstream: svc.Upstream, Headers: maskHeaders(svc.Headers), TimeoutMs: svc.Timeout.Milliseconds(),
		MaxConns: svc.MaxConns, Enabled: svc.Enabled, Description: svc.Description, Source: "api",
		CreatedAt: isoTime(svc.CreatedAt), UpdatedAt: isoTime(svc.UpdatedAt),
	}
}

// listServices: GET /api/services (admin), by name.
func (s *Server) listServices(_ context.Context, rc *fasthttp.RequestCtx, _ accounts.User) error {
	out := []serviceView{}
	for name, svc := range s.cfg.Services {
		out = append(out, configServiceView(name, svc))
	}
	if s.ctl != nil {
		for name, svc := range s.ctl.View().Services {
			if _, shadowed := s.cfg.Services[name]; !shadowed {
				out = append(out, apiServiceView(svc))
			}
		}
	}
	slices.SortFunc(out, func(a, b serviceView) int { return strings.Compare(a.Name, b.Name) })
	writeJSON(rc, fasthttp.StatusOK, servicesBody{Services: out})
	return nil
}

// getService: GET /api/services/{name} (admin).
func (s *Server) getService(_ context.Context, rc *fasthttp.RequestCtx, _ accounts.User) error {
	name, _ := rc.UserValue("name").(string)
	if svc, ok := s.cfg.Services[name]; ok {
		writeJSON(rc, fasthttp.StatusOK, serviceBody{configServiceView(name, svc)})
		return nil
	}
	if s.ctl == nil {
		return control.ErrServiceNotFound
	}
	svc, err := s.ctl.GetService(name)
	if err != nil {
		return err
	}
	writeJSON(rc, fasthttp.StatusOK, serviceBody{apiServiceView(svc)})
	return nil
}

type serviceRequest struct {
	Name        json.RawMessage `json:"name"`
	Upstream    json.RawMessage `json:"upstream"`
	Headers     json.RawMessage `json:"headers"`
	TimeoutMs   json.RawMessage `json:"timeoutMs"`
	MaxConns    json.RawMessage `json:"maxConns"`
	Enabled     json.RawMessage `json:"enabled"`
	Description json.RawMessage `json:"description"`
}

// Limits of a service's fields.
const (
	maxServiceTimeout = 10 * time.Minute
	maxServiceConns   = 10_000
	maxDescription    = 500
	maxHeaders        = 32
)

// serviceInput decodes and validates a service body with the config
// file's rules (validateService) and the API's bounds.
func (s *Server) serviceInput(name string, req serviceRequest) (control.ServiceInput, error) {
	var in control.ServiceInput
	up, err := reqString(req.Upstream, "upstream")
	if err != nil {
		return in, err
	}
	in.Upstream = up
	if absent(req.Headers) {
		in.KeepHeaders = len(req.Headers) == 0 // absent keeps them; null clears them
	} else if err := json.Unmarshal(req.Headers, &in.Headers); err != nil {
		return in, invalidField("headers", "must be an object of header names to string values")
	}
	if len(in.Headers) > maxHeaders {
		return in, invalidField("headers", "must have at most %d entries", maxHeaders)
	}
	if ms, ok, err := optInt(req.TimeoutMs, "timeoutMs", 0, maxServiceTimeout.Milliseconds()); err != nil {
		return in, err
	} else if ok {
		in.Timeout = time.Duration(ms) * time.Millisecond
	}
	if n, ok, err := optInt(req.MaxConns, "maxConns", 0, maxServiceConns); err != nil {
		return in, err
	} else if ok {
		in.MaxConns = int(n)
	}
	in.Enabled = true
	if v, ok, err := optBool(req.Enabled, "enabled"); err != nil {
		return in, err
	} else if ok {
		in.Enabled = v
	}
	if d, ok, err := optString(req.Description, "description"); err != nil {
		return in, err
	} else if ok {
		if utf8.RuneCountInString(d) > maxDescription {
			return in, invalidField("description", "must be at most %d characters", maxDescription)
		}
		in.Description = d
	}
	if err := validateService(name, Service{Upstream: in.Upstream, Headers: in.Headers, Timeout: in.Timeout, MaxConns: in.MaxConns}); err != nil {
		msg := strings.TrimPrefix(err.Error(), "httpapi: services.")
		msg = strings.TrimPrefix(msg, name+".")
		field, rest, _ := strings.Cut(msg, " ")
		if strings.HasPrefix(field, "\"") || strings.HasPrefix(field, name+":") {
			field, rest = "name", "must be 1-64 characters of [A-Za-z0-9._-]"
		}
		field = strings.TrimSuffix(field, ":")
		if i := strings.IndexByte(field, '.'); i > 0 {
			field = field[:i]
		}
		return in, invalidField(fieldName(field), "%s", strings.TrimPrefix(rest, ": "))
	}
	if !s.cfg.AllowLinkLocal && linkLocalUpstream(in.Upstream) {
		return in, invalidField("upstream", "must not be a link-local or cloud metadata address (169.254.0.0/16, fe80::/10, fd00:ec2::254) unless the server allows it (server.services_allow_link_local)")
	}
	return in, nil
}

// fieldName maps the config file's field names to the API's.
func fieldName(f string) string {
	switch f {
	case "timeout":
		return "timeoutMs"
	case "max_conns":
		return "maxConns"
	}
	return f
}

// createService: POST /api/services (admin) {name, upstream, headers?,
// timeoutMs?, maxConns?, enabled?, description?}.
func (s *Server) createService(ctx context.Context, rc *fasthttp.RequestCtx, _ accounts.User) error {
	if s.ctl == nil {
		return errNoControl
	}
	var req serviceRequest
	if err := s.decodeBody(rc, &req); err != nil {
		return err
	}
	name, err := reqString(req.Name, "name")
	if err != nil {
		return err
	}
	if !validServiceName(name) {
		return invalidField("name", "must be 1-64 characters of [A-Za-z0-9._-]")
	}
	if _, ok := s.cfg.Services[name]; ok {
		return control.ErrServiceExists
	}
	in, err := s.serviceInput(name, req)
	if err != nil {
		return err
	}
	svc, err := s.ctl.CreateService(ctx, name, in)
	if err != nil {
		return err
	}
	writeJSON(rc, fasthttp.StatusCreated, serviceBody{apiServiceView(svc)})
	return nil
}

// updateService: PUT /api/services/{name} (admin): the full new state;
// headers absent keeps the current ones, null or {} removes them.
func (s *Server) updateService(ctx context.Context, rc *fasthttp.RequestCtx, _ accounts.User) error {
	name, _ := rc.UserValue("name").(string)
	if _, ok := s.cfg.Services[name]; ok {
		return errServiceReadOnly
	}
	if s.ctl == nil {
		return control.ErrServiceNotFound
	}
	var req serviceRequest
	if err := s.decodeBody(rc, &req); err != nil {
		return err
	}
	if n, ok, err := optString(req.Name, "name"); err != nil {
		return err
	} else if ok && n != name {
		return invalidField("name", "cannot be changed (create a service under the new name)")
	}
	in, err := s.serviceInput(name, req)
	if err != nil {
		return err
	}
	svc, err := s.ctl.UpdateService(ctx, name, in)
	if err != nil {
		return err
	}
	writeJSON(rc, fasthttp.StatusOK, serviceBody{apiServiceView(svc)})
	return nil
}

// deleteService: DELETE /api/services/{name} (admin).
func (s *Server) deleteService(ctx context.Context, rc *fasthttp.RequestCtx, _ accounts.User) error {
	name, _ := rc.UserValue("name").(string)
	if _, ok := s.cfg.Services[name]; ok {
		return errServiceReadOnly
	}
	if s.ctl == nil {
		return control.ErrServiceNotFound
	}
	if err := s.ctl.DeleteService(ctx, name); err != nil {
		return err
	}
	writeJSON(rc, fasthttp.StatusOK, successBody{Success: true, Message: "service deleted"})
	return nil
}

// knownService reports whether the proxy serves name now.
func (s *Server) knownService(name string) bool {
	_, ok := s.table.Load().byName[name]
	return ok
}

// optInt decodes an integer field in lo..hi; ok is false when absent or
// null.
func optInt(raw json.RawMessage, field string, lo, hi int64) (int64, bool, error) {
	if absent(raw) {
		return 0, false, nil
	}
	n, err := strconv.ParseInt(string(bytes.TrimSpace(raw)), 10, 64)
	if err != nil || n < lo || n > hi {
		return 0, false, invalidField(field, "must be an integer between %d and %d", lo, hi)
	}
	return n, true, nil
}

// maxKeyServices bounds a key's service list.
const maxKeyServices = 64

// optServices decodes a key's services: an array of names of services
// the proxy serves now. ok is false when absent; null or [] sets the
// empty list (every service).
func (s *Server) optServices(raw json.RawMessage) ([]string, bool, error) {
	if len(raw) == 0 {
		return nil, false, nil
	}
	if absent(raw) {
		return []string{}, true, nil
	}
	var l []string
	if err := json.Unmarshal(raw, &l); err != nil {
		return nil, false, invalidField("services", "must be an array of service names")
	}
	if len(l) > maxKeyServices {
		return nil, false, invalidField("services", "must name at most %d services", maxKeyServices)
	}
	if l == nil {
		l = []string{}
	}
	for _, name := range l {
		if !s.knownService(name) {
			return nil, false, invalidField("services", "names an unknown service %q", name)
		}
	}
	if len(l) > 0 && s.ctl == nil {
		return nil, false, errNoControl
	}
	return l, true, nil
}
