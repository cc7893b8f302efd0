package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"time"

	"gatehouse/actors"
)

// resetPassword sets a new password for the admin named by
// GATEHOUSE_ADMIN_EMAIL (default admin@localhost): GATEHOUSE_ADMIN_PASSWORD,
// or a generated one printed once. It opens the data dir itself, so the
// server must be stopped (the data dir lock says so otherwise); the
// admin's sessions end.
func resetPassword(ctx context.Context, cfg fileConfig, getenv func(string) string, stderr io.Writer) error {
	n, err := openNode(cfg, slog.New(slog.DiscardHandler), nil, nil)
	if err != nil {
		return err
	}
	defer n.close()
	email := bootstrapEmail(getenv)
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	u, err := n.sys.UserByEmail(ctx, email)
	if err != nil {
		return fmt.Errorf("reset password of %s: %w", email, err)
	}
	password := getenv("GATEHOUSE_ADMIN_PASSWORD")
	generated := password == ""
	if generated {
		if password, err = actors.NewPassword(); err != nil {
			return fmt.Errorf("reset password of %s: %w", email, err)
		}
	}
	if _, err := n.sys.UpdateUser(ctx, u.ID, actors.UserPatch{Password: &password}); err != nil {
		return fmt.Errorf("reset password of %s: %w", email, err)
	}
	if generated {
		fmt.Fprintf(stderr, "new password for %s (shown once): %s\n", email, password)
	} else {
		fmt.Fprintf(stderr, "password of %s set from GATEHOUSE_ADMIN_PASSWORD\n", email)
	}
	return nil
}

// versionLine is the build's module version, commit and Go version.
func versionLine() string {
	v, commit, dirty, goVersion := "(devel)", "unknown", "", "unknown"
	if bi, ok := debug.ReadBuildInfo(); ok {
		goVersion = bi.GoVersion
		if bi.Main.Version != "" {
			v = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				commit = s.Value
			case "vcs.modified":
				if s.Value == "true" {
					dirty = " (modified)"
				}
			}
		}
	}
	return fmt.Sprintf("gatehouse %s, commit %s%s, %s", v, commit, dirty, goVersion)
}

// lockDataDir takes the data dir's lock file for this process: a second
// gatehouse on the same data dir is told who holds it. The lock goes with
// the process (or unlock).
func lockDataDir(dir string) (unlock func(), err error) {
	path := filepath.Join(dir, "LOCK")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("data dir lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		b, _ := io.ReadAll(f)
		f.Close()
		pid := strings.TrimSpace(string(b))
		if pid == "" {
			pid = "unknown"
		}
		return nil, fmt.Errorf("data dir %s in use by another gatehouse (pid %s)", dir, pid)
	}
	_ = f.Truncate(0)
	_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}
