package httpapi

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"
)

// Defaults of Config and Service.
const (
	DefaultMaxBodyBytes      = 64 << 10
	DefaultMaxProxyBodyBytes = 8 << 20
	DefaultRequestTimeout    = 5 * time.Second
	DefaultUpstreamTimeout   = 30 * time.Second
	DefaultGracePeriod       = 24 * time.Hour
)

// Config configures a Server. Start from DefaultConfig.
type Config struct {
	// Host and Port are the address cmd listens on; Server itself serves
	// whatever listener it is given.
	Host string
	Port int
	// MaxBodyBytes bounds the JSON body of management requests (413 beyond).
	MaxBodyBytes int
	// MaxProxyBodyBytes bounds the body of proxied requests (413 beyond).
	// 0 means DefaultMaxProxyBodyBytes. The listener reads at most
	// max(MaxBodyBytes, MaxProxyBodyBytes) bytes of any body.
	MaxProxyBodyBytes int
	// SecureCookies adds Secure to the session cookie (set it behind TLS).
	SecureCookies bool
	// GracePeriod is reported as gracePeriodHours by rotate; it must match
	// the actors' setting.
	GracePeriod time.Duration
	// RequestTimeout bounds each call into the services.
	RequestTimeout time.Duration
	// Services are the proxied upstreams, by the name used in the path.
	Services map[string]Service
	// Listener is the value of the "listener" metrics label, e.g. "api".
	Listener string
	// AllowLinkLocal lets services created through the API point at
	// link-local addresses (169.254.0.0/16, fe80::/10: cloud metadata),
	// which they may not by default (linklocal.go).
	AllowLinkLocal bool
}

// Service is one proxied upstream.
type Service struct {
	// Upstream is an http or https URL, optionally with a base path:
	// "http://10.0.0.5:9000/base". /v1/{rest} is appended to the path.
	Upstream string
	// Headers are set on every request sent upstream (credentials of the
	// upstream, for example); they replace client headers of the same name.
	Headers map[string]string
	// Timeout bounds one upstream exchange, a streamed answer included
	// (504 if no status came back in time, a cut stream after); 0 means
	// DefaultUpstreamTimeout.
	Timeout time.Duration
	// MaxConns bounds the keep-alive connections to the upstream; 0 means
	// fasthttp's default (512).
	MaxConns int
	// noLinkLocal refuses to dial link-local addresses (a service of the
	// API without Config.AllowLinkLocal; see linklocal.go).
	noLinkLocal bool
}

// DefaultConfig returns the defaults documented in doc.go.
func DefaultConfig() Config {
	return Config{
		Host:              "127.0.0.1",
		Port:              8080,
		MaxBodyBytes:      DefaultMaxBodyBytes,
		MaxProxyBodyBytes: DefaultMaxProxyBodyBytes,
		GracePeriod:       DefaultGracePeriod,
		RequestTimeout:    DefaultRequestTimeout,
		Services:          map[string]Service{},
		Listener:          "api",
	}
}

// Validate reports the first invalid field, by name.
func (c Config) Validate() error {
	switch {
	case c.Port < 0 || c.Port > 65535:
		return errors.New("httpapi: port must be in 0..65535")
	case c.MaxBodyBytes < 1:
		return errors.New("httpapi: max_body_bytes must be > 0")
	case c.MaxProxyBodyBytes < 0:
		return errors.New("httpapi: max_proxy_body_bytes must be >= 0")
	case c.GracePeriod < 0:
		return errors.New("httpapi: grace_period must be >= 0")
	case c.RequestTimeout <= 0:
		return errors.New("httpapi: request_timeout must be > 0")
	case c.Listener == "":
		return errors.New("httpapi: listener must not be empty")
	}
	for name, svc := range c.Services {
		if err := validateService(name, svc); err != nil {
			return err
		}
	}
	return nil
}

func validateService(name string, svc Service) error {
	if !validServiceName(name) {
		return fmt.Errorf("httpapi: services.%q: name must be 1-64 characters of [A-Za-z0-9._-]", name)
	}
	if _, err := parseUpstream(svc.Upstream); err != nil {
		return fmt.Errorf("httpapi: services.%s.upstream: %w", name, err)
	}
	switch {
	case svc.Timeout < 0:
		return fmt.Errorf("httpapi: services.%s.timeout must be >= 0", name)
	case svc.MaxConns < 0:
		return fmt.Errorf("httpapi: services.%s.max_conns must be >= 0", name)
	}
	for k, v := range svc.Headers {
		if !validToken(k) {
			return fmt.Errorf("httpapi: services.%s.headers: %q is not a valid header name", name, k)
		}
		if strings.ContainsAny(v, "\r\n\x00") {
			return fmt.Errorf("httpapi: services.%s.headers.%s: value must not contain CR, LF or NUL", name, k)
		}
	}
	return nil
}

func validServiceName(name string) bool {
	if name == "" || len(name) > 64 || name == "." || name == ".." {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-'
		if !ok {
			return false
		}
	}
	return true
}

// validToken reports whether s is an RFC 9110 token (a header name).
func validToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c <= ' ' || c >= 0x7f || strings.IndexByte(`"(),/:;<=>?@[\]{}`, c) >= 0 {
			return false
		}
	}
	return true
}

// upstreamURL is a parsed Service.Upstream.
type upstreamURL struct {
	tls      bool
	addr     string // host:port to dial
	host     string // Host header
	basePath string // "" or "/base", no trailing slash
}

func parseUpstream(raw string) (upstreamURL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return upstreamURL{}, errors.New("must be an absolute http or https URL")
	}
	var port string
	switch u.Scheme {
	case "http":
		port = "80"
	case "https":
		port = "443"
	default:
		return upstreamURL{}, errors.New("must be an absolute http or https URL")
	}
	switch {
	case u.Hostname() == "":
		return upstreamURL{}, errors.New("must name a host")
	case u.User != nil || u.RawQuery != "" || u.Fragment != "" || u.ForceQuery:
		return upstreamURL{}, errors.New("must not carry user info, a query or a fragment")
	}
	if p := u.Port(); p != "" {
		port = p
	}
	addr := u.Hostname() + ":" + port
	if strings.Contains(u.Hostname(), ":") { // IPv6 literal
		addr = "[" + u.Hostname() + "]:" + port
	}
	return upstreamURL{
		tls:      u.Scheme == "https",
		addr:     addr,
		host:     u.Host,
		basePath: strings.TrimRight(u.EscapedPath(), "/"),
	}, nil
}
