package gateway

import (
	"testing"

	"github.com/google/uuid"
)

// TestMCPSecretsUnreadable: a server whose sealed headers cannot be opened
// (the data dir restarted under another master key) is an error, not a
// connection made without its credentials.
func TestMCPSecretsUnreadable(t *testing.T) {
	n := newNode(t, DefaultConfig(), nil)
	gw := start(n)
	if _, err := gw.CreateMCPServer(ctx(t), MCPServerInput{Name: ptr("remote"), Transport: ptr(MCPStreamable),
		URL: ptr("http://127.0.0.1:9/mcp"), Headers: map[string]string{"Authorization": "Bearer x"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := gw.GrantMCP(ctx(t), "remote", GrantUser, "alice", nil, nil); err != nil {
		t.Fatal(err)
	}
	if _, sec, err := gw.MCPServerSecrets(ctx(t), "remote"); err != nil || sec.Headers["Authorization"] != "Bearer x" {
		t.Fatalf("secrets = %+v, %v", sec, err)
	}
	n.Stop()
	n.MasterKey = make([]byte, 32)
	n.MasterKey[0] = 1
	gw = start(n)
	if _, sec, err := gw.MCPServerSecrets(ctx(t), "remote"); err == nil {
		t.Errorf("MCPServerSecrets under another master key = %+v, want an error", sec)
	}
	if access, err := gw.MCPAccessFor(ctx(t), uuid.Nil, "alice"); err == nil {
		t.Errorf("MCPAccessFor under another master key = %+v, want an error", access)
	}
}
