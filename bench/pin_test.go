package bench

import (
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// TestPinPID: pinPID moves every thread of a running process to the CPU
// (-pin's server side), as the kernel reports it.
func TestPinPID(t *testing.T) {
	if runtime.NumCPU() < 2 {
		t.Skip("needs 2 CPUs")
	}
	if _, err := exec.LookPath("taskset"); err != nil {
		t.Skip("no taskset (util-linux)")
	}
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	if _, err := pinPID(cmd.Process.Pid, serverCPU); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(cmd.Process.Pid) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "Cpus_allowed_list:"); ok {
			if got := strings.TrimSpace(v); got != strconv.Itoa(serverCPU) {
				t.Fatalf("CPUs allowed %q, want %d", got, serverCPU)
			}
			return
		}
	}
	t.Fatal("no Cpus_allowed_list in /proc/PID/status")
}
