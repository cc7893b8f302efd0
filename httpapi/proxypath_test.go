package httpapi

import (
	"bytes"
	"net"
	"strings"
	"testing"
)

func TestParseProxyPath(t *testing.T) {
	tests := []struct {
		path    string
		service string
		suffix  string
		ok      bool
	}{
		{"/api/proxy/llm/v1/chat", "llm", "/v1/chat", true},
		{"/api/proxy/llm/v1/", "llm", "/v1/", true},
		{"/api/proxy/llm/v1/a/b%2Fc", "llm", "/v1/a/b%2Fc", true},
		{"/api/proxy/llm/v1/a//b", "llm", "/v1/a//b", true},
		{"/api/proxy/llm/v1/..a/b.", "llm", "/v1/..a/b.", true},
		{"/api/proxy/llm/v1/.../x", "llm", "/v1/.../x", true},
		{"/api/proxy/llm/v1", "", "", false},
		{"/api/proxy/llm/v2/chat", "", "", false},
		{"/api/proxy/llm/V1/chat", "", "", false},
		{"/api/proxy/llm", "", "", false},
		{"/api/proxy/", "", "", false},
		{"/api/proxy//v1/x", "", "", false},
		{"/api/proxyllm/v1/x", "", "", false},
		{"/api/keys", "", "", false},
		{"/api/proxy/llm/v1/..", "", "", false},
		{"/api/proxy/llm/v1/../x", "", "", false},
		{"/api/proxy/llm/v1/./x", "", "", false},
		{"/api/proxy/llm/v1/a/.", "", "", false},
		{"/api/proxy/llm/v1/%2e%2e/x", "", "", false},
		{"/api/proxy/llm/v1/.%2E/x", "", "", false},
		{"/api/proxy/llm/v1/a%2f..%2fb", "", "", false},
		{"/api/proxy/llm/v1/a%5C..%5Cb", "", "", false},
		{"/api/proxy/llm/v1/a\\..\\b", "", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			svc, suffix, ok := parseProxyPath([]byte(tt.path))
			if string(svc) != tt.service || string(suffix) != tt.suffix || ok != tt.ok {
				t.Errorf("parseProxyPath(%q) = %q, %q, %v, want %q, %q, %v", tt.path, svc, suffix, ok, tt.service, tt.suffix, tt.ok)
			}
		})
	}
}

func FuzzParseProxyPath(f *testing.F) {
	for _, s := range []string{
		"/api/proxy/llm/v1/chat", "/api/proxy/llm/v1/", "/api/proxy//v1/", "/api/proxy/a/v1/%2e%2", "/api/proxy/a/v1/%",
		"/api/proxy/a/v1/..", "/api/proxy/a/v2/x", "/", "",
	} {
		f.Add(s, "llm", "chat/completions")
	}
	f.Fuzz(func(t *testing.T, path, service, rest string) {
		svc, suffix, ok := parseProxyPath([]byte(path))
		if ok {
			if got := "/api/proxy/" + string(svc) + string(suffix); got != path {
				t.Fatalf("parseProxyPath(%q) parts rebuild %q", path, got)
			}
			if len(svc) == 0 || bytes.IndexByte(svc, '/') >= 0 || !bytes.HasPrefix(suffix, v1Segment) || hasDotSegment(suffix) || hasSmuggling(suffix) {
				t.Fatalf("parseProxyPath(%q) = %q, %q: bad parts", path, svc, suffix)
			}
		}
		// Round trip: a valid service and a rest without dot segments or
		// smuggled bytes come back exactly.
		if !validServiceName(service) || hasDotSegment([]byte("/"+rest)) || hasSmuggling([]byte("/"+rest)) {
			return
		}
		p := "/api/proxy/" + service + "/v1/" + rest
		svc, suffix, ok = parseProxyPath([]byte(p))
		if !ok || string(svc) != service || string(suffix) != "/v1/"+rest {
			t.Fatalf("parseProxyPath(%q) = %q, %q, %v; want %q, %q", p, svc, suffix, ok, service, "/v1/"+rest)
		}
	})
}

func TestHasDotSegmentEdges(t *testing.T) {
	for _, p := range []string{"%", "%2", "%2e", "a%", "/%2", strings.Repeat("%2e", 3)} {
		hasDotSegment([]byte(p)) // must not panic on truncated escapes
	}
	if !hasDotSegment([]byte("%2e")) || hasDotSegment([]byte("%2e%2e%2e")) {
		t.Error("hasDotSegment misreads percent-encoded dots")
	}
}

func TestAppendRemoteIP(t *testing.T) {
	tests := []struct {
		addr net.Addr
		want string
	}{
		{&net.TCPAddr{IP: net.IPv4(203, 0, 113, 9), Port: 1}, "203.0.113.9"},
		{&net.TCPAddr{IP: net.IP{10, 0, 0, 255}, Port: 1}, "10.0.0.255"},
		{&net.TCPAddr{IP: net.ParseIP("::ffff:192.0.2.1"), Port: 1}, "192.0.2.1"},
		{&net.TCPAddr{IP: net.ParseIP("2001:db8::1"), Port: 1}, "2001:db8::1"},
		{&net.TCPAddr{IP: net.ParseIP("fe80::1"), Port: 1, Zone: "eth0"}, "fe80::1%eth0"},
		{&net.UnixAddr{Name: "/tmp/s", Net: "unix"}, "/tmp/s"},
	}
	for _, tt := range tests {
		if got := string(appendRemoteIP([]byte("x, "), tt.addr)); got != "x, "+tt.want {
			t.Errorf("appendRemoteIP(%v) = %q, want %q", tt.addr, got, "x, "+tt.want)
		}
	}
}
