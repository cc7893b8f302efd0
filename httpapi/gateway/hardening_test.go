package gateway

import "testing"

// TestGatewayBadInput (issue 14): invalid UTF-8 bodies are refused and
// change nothing; a provider's api_base may not carry credentials, a query
// or a fragment; a new API key's answer is not cacheable.
func TestGatewayBadInput(t *testing.T) {
	e := newGWEnv(t, gwOpts{token: gwToken})
	e.must(400, "POST", "/v1/providers", gwToken, "{\"name\":\"\xff\",\"provider_type\":\"echo\"}")
	if r := e.must(200, "GET", "/v1/providers", gwToken, ""); len(r.body["data"].([]any)) != 0 {
		t.Errorf("a refused body created a provider: %s", r.raw)
	}
	for _, base := range []string{"https://user:pw@api.example.com/v1", "https://api.example.com/v1?key=x", "https://api.example.com/v1#frag"} {
		r := e.do("POST", "/v1/providers", gwToken, `{"name":"p","provider_type":"openai_compat","api_base":"`+base+`"}`)
		if r.status != 400 || r.errCode() != codeInvalid {
			t.Errorf("api_base %s = %d %s, want 400", base, r.status, r.raw)
		}
	}
	r := e.must(201, "POST", "/v1/api-keys", gwToken, `{"name":"k","scopes":["operator.admin"]}`)
	if got := r.header.Get("Cache-Control"); got != "no-store" {
		t.Errorf("new API key answer: Cache-Control %q, want no-store", got)
	}
}
