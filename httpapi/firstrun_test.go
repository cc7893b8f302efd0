package httpapi

import (
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

// TestRootHeadAndNewline: / sends browsers to the console with a
// relative Location (an absolute one names the wrong scheme behind TLS);
// HEAD /health answers as GET does, without a body; JSON answers, errors
// included, end with a newline.
func TestRootHeadAndNewline(t *testing.T) {
	w := newTestEnv(t, withWorld())
	for _, m := range []string{"GET", "HEAD"} {
		r := w.do(t, request{method: m, path: "/"})
		if r.status != 302 || r.headers["Location"] != "/console/" {
			t.Errorf("%s / = %d, Location %q; want 302 /console/", m, r.status, r.headers["Location"])
		}
	}
	get := w.do(t, request{method: "GET", path: "/health"})
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.Header.SetMethod("HEAD")
	req.SetRequestURI("http://" + testHost + "/health")
	if err := w.client.DoTimeout(req, resp, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if get.status != 200 || resp.StatusCode() != 200 || len(resp.Body()) != 0 || string(resp.Header.ContentType()) != get.headers["Content-Type"] ||
		resp.Header.ContentLength() != len(get.body) {
		t.Errorf("HEAD /health = %d %q length %d; GET = %d %v %q", resp.StatusCode(), resp.Header.ContentType(), resp.Header.ContentLength(), get.status, get.headers, get.body)
	}
	for _, r := range []response{get, w.do(t, request{method: "GET", path: "/api/nope"}), w.do(t, request{method: "POST", path: "/api/keys/validate"})} {
		if !strings.HasSuffix(string(r.body), "}\n") {
			t.Errorf("JSON answer %q does not end with a newline", r.body)
		}
	}
}
