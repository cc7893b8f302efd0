package bench

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
)

// wrk runs beside the suite's own load generator, to keep it honest: the
// same target, connections and duration, 2 threads, the same request
// (method, path and headers; a target with several keys rotates them).

var wrkRPS = regexp.MustCompile(`Requests/sec:\s+([0-9.]+)`)

// runWrk loads t with wrk once and returns its req/s. t's script is
// written on its first run.
func (s *Suite) runWrk(ctx context.Context, t *Target) (float64, error) {
	if t.wrkScript == "" {
		script, err := s.wrkScript(t)
		if err != nil {
			return 0, err
		}
		t.wrkScript = script
	}
	secs := int(s.cfg.Duration.Seconds())
	args := []string{"-t2", fmt.Sprintf("-c%d", s.cfg.Conns), fmt.Sprintf("-d%ds", max(secs, 1)), "-s", t.wrkScript, "http://" + t.Addr}
	out, err := exec.CommandContext(ctx, s.wrk, args...).CombinedOutput()
	if err != nil {
		return 0, fmt.Errorf("%v: %s", err, out)
	}
	m := wrkRPS.FindSubmatch(out)
	if m == nil {
		return 0, fmt.Errorf("no Requests/sec in %q", out)
	}
	if bytes.Contains(out, []byte("Non-2xx")) {
		return 0, fmt.Errorf("wrk saw non-2xx answers: %s", out)
	}
	return strconv.ParseFloat(string(m[1]), 64)
}

// wrkScript writes the Lua script that sends t's request, headers and all
// (a target with keys rotates them in X-API-Key), and returns its path.
// Its files are named after t, so that targets with as many keys (the
// -vs baseline's) do not share a key file.
func (s *Suite) wrkScript(t *Target) (string, error) {
	req := t.Requests[0]
	line, rest, _ := bytes.Cut(req, []byte("\r\n"))
	parts := strings.Fields(string(line))
	if len(parts) < 2 {
		return "", fmt.Errorf("bad request line %q", line)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "wrk.method = %q\nwrk.path = %q\n", parts[0], parts[1])
	sc := bufio.NewScanner(bytes.NewReader(rest))
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), ": ")
		if !ok || strings.EqualFold(name, "Content-Length") {
			continue
		}
		fmt.Fprintf(&b, "wrk.headers[%q] = %q\n", name, value)
	}
	base := filepath.Join(s.cfg.Dir, "wrk-"+strings.NewReplacer(" ", "-", ",", "", "/", "-").Replace(t.Name))
	if len(t.Keys) > 0 {
		keys := base + ".keys"
		if err := os.WriteFile(keys, []byte(strings.Join(t.Keys, "\n")+"\n"), 0o600); err != nil {
			return "", err
		}
		b.WriteString(WrkRotateKeys(keys))
	}
	path := base + ".lua"
	return path, os.WriteFile(path, []byte(b.String()), 0o600)
}

// WrkRotateKeys returns the part of a wrk script that sends each request
// with the next key of the file keys (one per line) in X-API-Key.
func WrkRotateKeys(keys string) string {
	return fmt.Sprintf(`local keys = {}
for line in io.lines(%q) do keys[#keys + 1] = line end
local i = 0
request = function()
  i = i %% #keys + 1
  wrk.headers["X-API-Key"] = keys[i]
  return wrk.format()
end
`, keys)
}
