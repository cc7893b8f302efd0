package httpapi

import (
	"slices"
	"testing"
)

// TestRedactArgs: /debug/pprof/cmdline shows no flag value that may be a
// secret, in either flag form (issue 35).
func TestRedactArgs(t *testing.T) {
	in := []string{"gatehouse", "serve", "--config", "c.json", "--gateway-token", "gw", "-etcd-password=pw", "--port", "8080", "--master-key-file", "/k", "--", "--gateway-token", "x"}
	want := []string{"gatehouse", "serve", "--config", "c.json", "--gateway-token", "[redacted]", "-etcd-password=[redacted]", "--port", "8080", "--master-key-file", "[redacted]", "--", "--gateway-token", "x"}
	if got := redactArgs(in); !slices.Equal(got, want) {
		t.Errorf("redactArgs =\n%q, want\n%q", got, want)
	}
	if got := redactArgs([]string{"gatehouse", "--gateway-token"}); !slices.Equal(got, []string{"gatehouse", "--gateway-token"}) {
		t.Errorf("a trailing flag: %q", got)
	}
}
