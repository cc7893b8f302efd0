package gateway

import (
	"bufio"
	"encoding/json"
	"net"
	"strconv"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"
)

func FuzzParseLang(f *testing.F) {
	for _, s := range []string{"", "vi-VN,vi;q=0.9", "zh;q=0.5, en;q=0.6", "*", "en;q=abc", ";;,,q="} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, h string) {
		if l := parseLang(h); l < langEN || l > langZH {
			t.Fatalf("parseLang(%q) = %d", h, l)
		}
	})
}

func FuzzMsgContent(f *testing.F) {
	for _, s := range []string{`"hi"`, `[{"type":"text","text":"a"}]`, `5`, `null`, `[1]`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, b string) {
		var c msgContent
		_ = json.Unmarshal([]byte(b), &c) // never panics
		var in respInput
		_ = json.Unmarshal([]byte(b), &in)
	})
}

// FuzzGatewayRequests sends arbitrary path parameters, query strings,
// JSON bodies and credentials to every route of the table (the WebSocket
// upgrade aside), as fasthttp parses them, straight into the gateway's
// handler on a real system: nothing may panic or answer 500.
func FuzzGatewayRequests(f *testing.F) {
	e := newGWEnv(f, gwOpts{token: gwToken})
	e.seedAgent("default", `{}`, "")
	routes := e.srv.Routes()
	f.Add(uint8(0), "default", "", `{}`, "Bearer "+gwToken)
	seeds := []struct{ param, query, body string }{
		{"default", "", `{"agent_key":"a1","provider":"echo","model":"m"}`},
		{"echo", "limit=5&offset=1", `{"name":"p2","provider_type":"echo","api_key":"sk-1234567890"}`},
		{"default", "stream=true", `{"model":"default","messages":[{"role":"user","content":"hi"}],"stream":true}`},
		{"x", "limit=-1&limit=2", `{"input":[{"role":"user","content":[{"type":"input_text","text":"hi"}]}]}`},
		{"%2e%2e", "user_id=\xff", "{\"name\":\"\xff\"}"},
		{"default", "", `[]`},
		{"default", "", `{"user_id":"bob","role":"operator"}`},
	}
	for i := range routes {
		for _, s := range seeds {
			f.Add(uint8(i), s.param, s.query, s.body, "Bearer "+gwToken)
		}
	}
	h := e.srv.Handler()
	f.Fuzz(func(t *testing.T, ri uint8, param, query, body, auth string) {
		rt := routes[int(ri)%len(routes)]
		if rt.Path == "/ws" {
			return
		}
		path := fillParams(rt.Path, param)
		raw := rt.Method + " " + path
		if query != "" {
			raw += "?" + query
		}
		raw += " HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: " + auth + "\r\nX-Gateway-User-Id: alice\r\n" +
			"Content-Type: application/json\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body
		var req fasthttp.Request
		if err := req.Read(bufio.NewReader(strings.NewReader(raw))); err != nil {
			return // fasthttp refuses it before any handler: 400 from the server
		}
		var rc fasthttp.RequestCtx
		rc.Init(&req, &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 9}, nil)
		h(&rc)
		_ = rc.Response.Body() // drains (and closes) a streamed answer
		if code := rc.Response.StatusCode(); code == 500 {
			t.Fatalf("%s %s?%q body %q = 500 %s", rt.Method, path, query, body, rc.Response.Body())
		}
	})
}

// fillParams puts v in every {param} of a router pattern.
func fillParams(pattern, v string) string {
	var b strings.Builder
	for {
		i := strings.IndexByte(pattern, '{')
		if i < 0 {
			return b.String() + pattern
		}
		j := strings.IndexByte(pattern[i:], '}')
		if j < 0 {
			return b.String() + pattern
		}
		b.WriteString(pattern[:i])
		b.WriteString(v)
		pattern = pattern[i+j+1:]
	}
}
