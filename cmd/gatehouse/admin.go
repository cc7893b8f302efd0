package main

import (
	"context"
	"errors"
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
	"gatehouse/actors/accounts"
)

// resetPassword sets a new password for the admin named by
// GATEHOUSE_ADMIN_EMAIL (default admin@localhost): GATEHOUSE_ADMIN_PASSWORD,
// or a generated one printed once. It opens the data dir itself, so the
// server must be stopped (the data dir lock says so otherwise); the
// admin's sessions end.
func resetPassword(ctx context.Context, cfg fileConfig, getenv func(string) string, stderr io.Writer) error {
	// It would join the cluster as a node of its own (and take shards from
	// the running ones).
	if cfg.clusterMode() {
		return errors.New("reset-password: not in cluster mode (cluster.etcd_endpoints is set): " +
			"another admin can set a new password from the console or with PATCH /api/users/{id}")
	}
	// A mistyped --data-dir must not become a new, empty data dir with a
	// master key of its own.
	if _, err := os.Stat(filepath.Join(cfg.DataDir, "wal.db")); err != nil {
		return fmt.Errorf("reset-password: %s holds no gatehouse data (no wal.db): give the server's data dir with --data-dir, GATEHOUSE_DATA_DIR or --config", cfg.DataDir)
	}
	n, err := openNode(ctx, cfg, slog.New(slog.DiscardHandler), nil, nil)
	if err != nil {
		return err
	}
	defer n.close()
	email := bootstrapEmail(getenv)
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	u, err := n.acc.UserByEmail(ctx, email)
	if errors.Is(err, accounts.ErrUserNotFound) {
		return fmt.Errorf("reset-password: no user %s in %s (GATEHOUSE_ADMIN_EMAIL names the admin, default admin@localhost)", email, cfg.DataDir)
	}
	if err != nil {
		return fmt.Errorf("reset password of %s: %w", email, err)
	}
	password := getenv("GATEHOUSE_ADMIN_PASSWORD")
	generated := password == ""
	if generated {
		if password, err = accounts.NewPassword(); err != nil {
			return fmt.Errorf("reset password of %s: %w", email, err)
		}
	}
	if _, err := n.acc.UpdateUser(ctx, u.ID, accounts.UserPatch{Password: &password}); err != nil {
		return fmt.Errorf("reset password of %s: %w", email, adminError(err))
	}
	if generated {
		fmt.Fprintf(stderr, "new password for %s (shown once): %s\n", email, password)
	} else {
		fmt.Fprintf(stderr, "password of %s set from GATEHOUSE_ADMIN_PASSWORD\n", email)
	}
	return nil
}

// adminError turns an invalid bootstrap admin field into an error naming
// the variable that set it, without the actors package's sentinel text
// ("GATEHOUSE_ADMIN_PASSWORD: password must be 8-72 bytes"). Other errors
// pass unchanged.
func adminError(err error) error {
	if !errors.Is(err, actors.ErrInvalidArgument) {
		return err
	}
	msg := strings.TrimSuffix(err.Error(), ": "+actors.ErrInvalidArgument.Error())
	msg = strings.TrimPrefix(msg, "bootstrap admin: ")
	name := "GATEHOUSE_ADMIN_PASSWORD"
	if strings.HasPrefix(msg, "email") {
		name = "GATEHOUSE_ADMIN_EMAIL"
	}
	return fmt.Errorf("%s: %s", name, msg)
}

// version and commit are stamped by `make build` (-ldflags -X), so that a
// build without VCS information (-buildvcs=false, a source tarball) still
// names them; empty: the module's build info.
var version, commit string

// versionLine is the build's version, commit and Go version.
func versionLine() string {
	v, rev, dirty, goVersion := "(devel)", "unknown", "", "unknown"
	if bi, ok := debug.ReadBuildInfo(); ok {
		goVersion = bi.GoVersion
		if bi.Main.Version != "" {
			v = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				if s.Value == "true" {
					dirty = " (modified)"
				}
			}
		}
	}
	if version != "" {
		v = version
	}
	if commit != "" {
		rev, dirty = commit, ""
	}
	return fmt.Sprintf("gatehouse %s, commit %s%s, %s", v, rev, dirty, goVersion)
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
