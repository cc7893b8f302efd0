//go:build unix

package main

import (
	"fmt"
	"syscall"
)

// raiseFDLimit raises the soft RLIMIT_NOFILE to the hard limit and
// returns the soft limit in force (Go's runtime does the same at start on
// some systems; doing it here makes it sure, and known for the caps).
func raiseFDLimit() (limit uint64, raised bool, err error) {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return 0, false, fmt.Errorf("getrlimit: %w", err)
	}
	if rl.Cur >= rl.Max {
		return uint64(rl.Cur), false, nil
	}
	want := rl
	want.Cur = rl.Max
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &want); err != nil {
		return uint64(rl.Cur), false, fmt.Errorf("setrlimit %d: %w", want.Cur, err)
	}
	return uint64(want.Cur), true, nil
}
