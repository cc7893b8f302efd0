package bench

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// BenchmarkProxyProcess serves gatehouse's handler (real actor system, WAL
// with fsync) in this process and loads it from a child process through
// the stub upstream in another, as cmd/benchsuite does: so a CPU profile
// of this benchmark is a profile of gatehouse alone under the suite's
// load. b.N is ignored: each run loads for 5 s.
//
//	go test ./bench -run '^$' -bench ProxyProcess -benchtime 1x -cpuprofile cpu.prof
//	go tool pprof -top bench.test cpu.prof
func BenchmarkProxyProcess(b *testing.B) {
	b.Run("bare-hop", func(b *testing.B) { benchProcess(b, 0, false) })
	b.Run("hot-key", func(b *testing.B) { benchProcess(b, 1, false) })
	b.Run("10k-keys", func(b *testing.B) { benchProcess(b, 10_000, false) })
	b.Run("fixed", func(b *testing.B) { benchProcess(b, 0, true) })
	b.Run("validate", func(b *testing.B) { benchProcess(b, 1, true) })
}

// benchProcess loads gatehouse with keys keys, or the bare hop if keys is
// 0; validate loads POST /api/keys/validate instead, or with 0 keys the
// suite's fixed-body handler.
func benchProcess(b *testing.B, keys int, validate bool) {
	dir := b.TempDir()
	suite := filepath.Join(dir, "benchsuite")
	if out, err := exec.Command("go", "build", "-o", suite, "gatehouse/bench/cmd/benchsuite").CombinedOutput(); err != nil {
		b.Fatalf("build benchsuite: %v\n%s", err, out)
	}
	stub, stubAddr, err := StartProc(dir, "stub", []string{suite, "stub"}, nil, 10*time.Second,
		func(line string) (string, bool) { return strings.CutPrefix(line, "listening ") })
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(stub.Stop)
	secrets := [][]byte{[]byte("none")}
	var addr string
	switch {
	case keys == 0 && validate:
		addr = serveLoopback(b, Upstream(fixedBody))
	case keys == 0:
		addr = serveLoopback(b, BareHop(stubAddr))
	default:
		addr, secrets = serveGatehouse(b, keys, stubAddr)
	}
	keyFile := filepath.Join(dir, "keys")
	if err := os.WriteFile(keyFile, bytes.Join(secrets, []byte("\n")), 0o600); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	out, err := exec.Command(suite, "load", "-addr", addr, "-keys", keyFile, "-validate="+strconv.FormatBool(validate)).CombinedOutput()
	if err != nil {
		b.Fatalf("load: %v\n%s", err, out)
	}
	b.Log(strings.TrimSpace(string(out)))
}
