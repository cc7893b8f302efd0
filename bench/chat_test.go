package bench

import (
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
)

// TestChatForwarderKeepsUpstreamConn checks the chat case's floor: the
// bare forwarder relays the stub's answers whole, streamed or not, and
// reuses one upstream connection for sequential calls (the reference the
// new-connections count of gatehouse is judged against).
func TestChatForwarderKeepsUpstreamConn(t *testing.T) {
	stub, err := startChatStub()
	if err != nil {
		t.Fatal(err)
	}
	defer stub.close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: ChatForwarder(stub.addr())}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()

	hc := &http.Client{Transport: &http.Transport{}}
	defer hc.CloseIdleConnections()
	for i := range 20 {
		stream := i%2 == 1
		body := `{"model":"agent:chat","messages":[{"role":"user","content":"hi"}]}`
		if stream {
			body = `{"model":"agent:chat","stream":true,"messages":[{"role":"user","content":"hi"}]}`
		}
		resp, err := hc.Post("http://"+ln.Addr().String()+"/v1/chat/completions", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		want := chatAnswer
		if stream {
			want = strings.Join(chatEvents, "")
		}
		if resp.StatusCode != 200 || string(b) != want {
			t.Fatalf("call %d (stream %v) = %d %q, want 200 %q", i, stream, resp.StatusCode, b, want)
		}
	}
	if n := stub.accepted.Load(); n != 1 {
		t.Errorf("stub accepted %d connections for 20 sequential calls, want 1", n)
	}
}
