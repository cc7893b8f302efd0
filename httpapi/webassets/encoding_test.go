package webassets

import (
	"bytes"
	"regexp"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"
)

func TestAccepts(t *testing.T) {
	tests := []struct {
		header, coding string
		want           bool
	}{
		{"", "gzip", false},
		{"gzip", "gzip", true},
		{"GZIP", "gzip", true},
		{"gzip, deflate, br", "br", true},
		{"gzip, deflate, br, zstd", "gzip", true},
		{"deflate", "gzip", false},
		{"gzip;q=0", "gzip", false},
		{"gzip; q=0.000", "gzip", false},
		{"gzip;q=0.5", "gzip", true},
		{"gzip;q=0.", "gzip", false},
		{"gzip;q=1", "gzip", true},
		{"*", "br", true},
		{"*;q=0", "br", false},
		{"*, br;q=0", "br", false},
		{"br;q=0, *", "br", false},
		{"identity", "gzip", false},
		{"gzipx", "gzip", false},
		{" br ;q=0.1", "br", true},
	}
	for _, tt := range tests {
		if got := Accepts([]byte(tt.header), tt.coding); got != tt.want {
			t.Errorf("Accepts(%q, %q) = %v, want %v", tt.header, tt.coding, got, tt.want)
		}
	}
	if n := testing.AllocsPerRun(100, func() { Accepts([]byte("gzip, deflate, br;q=0.9"), "br") }); n != 0 {
		t.Errorf("Accepts allocates %v times", n)
	}
}

// TestEncode: each form decodes to the identity bytes and is picked by
// Accept-Encoding, brotli first; an incompressible body is sent as is.
func TestEncode(t *testing.T) {
	b := []byte(strings.Repeat("swagger-ui-bundle ", 5000))
	e := Encode(b)
	if e.Gzip == nil || e.Brotli == nil || len(e.Brotli) >= len(b) || len(e.Gzip) >= len(b) {
		t.Fatalf("gzip %d, brotli %d bytes of %d", len(e.Gzip), len(e.Brotli), len(b))
	}
	gz, err := fasthttp.AppendGunzipBytes(nil, e.Gzip)
	if err != nil || !bytes.Equal(gz, b) {
		t.Errorf("gzip does not decode to the body: %v", err)
	}
	br, err := fasthttp.AppendUnbrotliBytes(nil, e.Brotli)
	if err != nil || !bytes.Equal(br, b) {
		t.Errorf("brotli does not decode to the body: %v", err)
	}
	for _, tt := range []struct{ accept, want string }{{"", ""}, {"gzip", "gzip"}, {"gzip, br", "br"}, {"br;q=0, gzip", "gzip"}, {"identity", ""}} {
		body, enc := e.For([]byte(tt.accept))
		want := map[string][]byte{"": b, "gzip": e.Gzip, "br": e.Brotli}[tt.want]
		if enc != tt.want || !bytes.Equal(body, want) {
			t.Errorf("For(%q) = %q, want %q", tt.accept, enc, tt.want)
		}
	}
	tiny := Encode([]byte("{}"))
	if body, enc := tiny.For([]byte("gzip, br")); enc != "" || string(body) != "{}" {
		t.Errorf("a body compression does not shrink was sent as %q", enc)
	}
}

// acceptsRef is Accepts written plainly, with strings and a regexp.
func acceptsRef(h, coding string) bool {
	zero := regexp.MustCompile(`^0(\.0*)?$`)
	star := false
	for _, part := range strings.Split(h, ",") {
		fields := strings.Split(part, ";")
		name := strings.TrimSpace(fields[0])
		if !strings.EqualFold(name, coding) && name != "*" {
			continue
		}
		ok := true
		for _, p := range fields[1:] {
			if k, v, found := strings.Cut(strings.TrimSpace(p), "="); found && strings.EqualFold(strings.TrimSpace(k), "q") {
				ok = !zero.MatchString(strings.TrimSpace(v))
				break
			}
		}
		if strings.EqualFold(name, coding) {
			return ok
		}
		star = ok
	}
	return star
}

func FuzzAccepts(f *testing.F) {
	for _, s := range []string{"gzip", "br;q=0", "*;q=0.5, gzip;q=0", ";;,,q=", "gzip;q=0.0.0", "br; Q = 0.00 ;x=1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, h string) {
		for _, coding := range []string{"br", "gzip"} {
			if got, want := Accepts([]byte(h), coding), acceptsRef(h, coding); got != want {
				t.Fatalf("Accepts(%q, %s) = %v, want %v", h, coding, got, want)
			}
		}
	})
}
