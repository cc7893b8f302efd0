package main

import (
	"bytes"
	"encoding/hex"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestMasterKeySource (issue 14): the master key can live outside the
// data dir (GATEHOUSE_MASTER_KEY, or master_key_file); only without either
// is it generated inside it.
func TestMasterKeySource(t *testing.T) {
	// Its own data dir and ports: independent of the others, mostly waiting on its process.
	t.Parallel()
	lg := slog.New(slog.DiscardHandler)
	hexKey := strings.Repeat("ab", 32)
	outside := filepath.Join(t.TempDir(), "gatehouse.key")
	if err := os.WriteFile(outside, []byte(hexKey+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, env, file string
		ok, inDataDir   bool
	}{
		{"environment", hexKey, "", true, false},
		{"file outside the data dir", "", outside, true, false},
		{"missing file", "", filepath.Join(t.TempDir(), "nope"), false, false},
		{"bad environment value", "xyz", "", false, false},
		{"default: generated in the data dir", "", "", true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := defaultConfig()
			cfg.DataDir, cfg.masterKey, cfg.MasterKeyFile = t.TempDir(), tt.env, tt.file
			key, err := loadMasterKey(cfg, lg)
			if (err == nil) != tt.ok {
				t.Fatalf("loadMasterKey = %v, want ok %v", err, tt.ok)
			}
			if tt.ok && tt.env != "" && !bytes.Equal(key, bytes.Repeat([]byte{0xab}, 32)) {
				t.Errorf("key = %x", key)
			}
			_, statErr := os.Stat(filepath.Join(cfg.DataDir, "master.key"))
			if (statErr == nil) != tt.inDataDir {
				t.Errorf("master.key in the data dir: %v, want %v", statErr == nil, tt.inDataDir)
			}
		})
	}
	c := defaultConfig()
	c.masterKey = hexKey
	if strings.Contains(c.masked(), hexKey) {
		t.Error("the masked config shows the key")
	}
}

// startMustFail runs `serve --config cfg` with env added and returns its
// output once it exited non-zero. A server that starts instead is
// stopped and fails the test.
func startMustFail(t *testing.T, cfg string, env ...string) string {
	t.Helper()
	bin, err := buildBinary()
	if err != nil {
		t.Fatal(err)
	}
	logs := &syncBuffer{}
	cmd := exec.Command(bin, "serve", "--config", cfg)
	cmd.Env = append(append(os.Environ(), "GATEHOUSE_ADMIN_EMAIL="+adminEmail, "GATEHOUSE_ADMIN_PASSWORD="+adminPassword), env...)
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	exited := func() bool {
		select {
		case <-done:
			return true
		default:
			return false
		}
	}
	if !eventually(30*time.Second, func() bool { return exited() || strings.Contains(logs.String(), `"msg":"listening"`) }) || !exited() {
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("gatehouse started, want it to refuse:\n%s", logs.String())
	}
	if cmd.ProcessState.ExitCode() == 0 {
		t.Fatalf("exit code 0, want non-zero:\n%s", logs.String())
	}
	return logs.String()
}

// TestMasterKeyCheck (issue 21): the data dir records its master key's
// fingerprint; a missing or wrong key stops the start with a message
// saying what to do, and nothing in the data dir changes; a key is
// generated only for an empty data dir; a data dir from before
// fingerprints adopts the key it has.
func TestMasterKeyCheck(t *testing.T) {
	// Its own data dir and ports: independent of the others, mostly waiting on its process.
	t.Parallel()
	keyA, keyB := "GATEHOUSE_MASTER_KEY="+strings.Repeat("a1", 32), "GATEHOUSE_MASTER_KEY="+strings.Repeat("b2", 32)
	adminEnv := []string{"GATEHOUSE_ADMIN_EMAIL=" + adminEmail, "GATEHOUSE_ADMIN_PASSWORD=" + adminPassword}
	start := func(t *testing.T, cfg string, env ...string) *child {
		t.Helper()
		return startServe(t, "", append(append(os.Environ(), adminEnv...), env...), "serve", "--config", cfg)
	}
	read := func(t *testing.T, path string) string {
		t.Helper()
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}

	t.Run("empty dir: key generated, fingerprint recorded", func(t *testing.T) {
		dir := t.TempDir()
		cfg := writeConfig(t, dir, nil)
		start(t, cfg).stop(t)
		key := read(t, filepath.Join(dir, "master.key"))
		if fp := read(t, filepath.Join(dir, "master.key.id")); strings.Contains(fp, strings.TrimSpace(key)) || !strings.HasPrefix(fp, "gatehouse-master-key-id v1 ") {
			t.Fatalf("master.key.id = %q", fp)
		}
		start(t, cfg).stop(t) // the same key again: fine
	})

	t.Run("master.key deleted", func(t *testing.T) {
		dir := t.TempDir()
		cfg := writeConfig(t, dir, nil)
		start(t, cfg).stop(t)
		if err := os.Remove(filepath.Join(dir, "master.key")); err != nil {
			t.Fatal(err)
		}
		out := startMustFail(t, cfg)
		for _, want := range []string{"master key missing", "restore master.key", "GATEHOUSE_MASTER_KEY"} {
			if !strings.Contains(out, want) {
				t.Errorf("output lacks %q:\n%s", want, out)
			}
		}
		if _, err := os.Stat(filepath.Join(dir, "master.key")); err == nil {
			t.Error("a new master.key was written into the data dir")
		}
	})

	t.Run("wrong GATEHOUSE_MASTER_KEY", func(t *testing.T) {
		dir := t.TempDir()
		cfg := writeConfig(t, dir, nil)
		start(t, cfg, keyA).stop(t)
		out := startMustFail(t, cfg, keyB)
		for _, want := range []string{"master key does not match this data dir", "GATEHOUSE_MASTER_KEY", "restore master.key"} {
			if !strings.Contains(out, want) {
				t.Errorf("output lacks %q:\n%s", want, out)
			}
		}
		// Without the environment, <data_dir>/master.key would be
		// generated: refused too, as the data dir is not new.
		if out := startMustFail(t, cfg); !strings.Contains(out, "master key missing") {
			t.Errorf("no key at all:\n%s", out)
		}
		start(t, cfg, keyA).stop(t)
	})

	t.Run("data dir from before fingerprints: adopted", func(t *testing.T) {
		dir := t.TempDir()
		cfg := writeConfig(t, dir, nil)
		start(t, cfg).stop(t)
		key := read(t, filepath.Join(dir, "master.key"))
		fpPath := filepath.Join(dir, "master.key.id")
		if err := os.Remove(fpPath); err != nil {
			t.Fatal(err)
		}
		c := start(t, cfg)
		c.stop(t)
		if !strings.Contains(c.logs.String(), "adopted the master key") {
			t.Errorf("no adoption logged:\n%s", c.logs.String())
		}
		if got := read(t, filepath.Join(dir, "master.key")); got != key {
			t.Error("master.key changed")
		}
		if err := checkFingerprint([]byte(read(t, fpPath)), mustHex(t, key)); err != nil {
			t.Errorf("adopted fingerprint: %v", err)
		}
	})
}

func mustHex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.TrimSpace(s))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestOpenMasterKey covers the cases of openMasterKey without a process:
// keys outside the data dir, the upgrade of a data dir from before
// fingerprints whose key is in the environment, and a damaged fingerprint.
func TestOpenMasterKey(t *testing.T) {
	lg := slog.New(slog.DiscardHandler)
	hexA, hexB := strings.Repeat("a1", 32), strings.Repeat("b2", 32)
	used := func(t *testing.T) string { // a data dir holding a WAL
		t.Helper()
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "wal.db"), nil, 0o600); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	snapOnly := func(t *testing.T) string {
		t.Helper()
		dir := t.TempDir()
		if err := os.MkdirAll(filepath.Join(dir, "snap"), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "snap", "0000000000000001.snap"), nil, 0o600); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	fingerprinted := func(hexKey string) func(t *testing.T) string {
		return func(t *testing.T) string {
			t.Helper()
			dir := used(t)
			if err := os.WriteFile(filepath.Join(dir, "master.key.id"), newFingerprint(mustHex(t, hexKey)), 0o600); err != nil {
				t.Fatal(err)
			}
			return dir
		}
	}
	damaged := func(t *testing.T) string {
		t.Helper()
		dir := used(t)
		if err := os.WriteFile(filepath.Join(dir, "master.key.id"), []byte("garbage\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	tests := []struct {
		name    string
		dir     func(t *testing.T) string
		env     string
		wantErr error // nil: opens, and the fingerprint then names the key
	}{
		{"empty dir, key in the environment", func(t *testing.T) string { return t.TempDir() }, hexA, nil},
		{"empty dir, generated", func(t *testing.T) string { return t.TempDir() }, "", nil},
		{"pre-fingerprint dir, key in the environment: adopted", used, hexA, nil},
		{"pre-fingerprint dir, no key: refused", used, "", errMasterKeyMissing},
		{"pre-fingerprint dir of snapshots only, no key: refused", snapOnly, "", errMasterKeyMissing},
		{"fingerprint matches", fingerprinted(hexA), hexA, nil},
		{"fingerprint of another key", fingerprinted(hexA), hexB, errMasterKeyMismatch},
		{"fingerprint, no key", fingerprinted(hexA), "", errMasterKeyMissing},
		{"damaged fingerprint", damaged, hexA, errMasterKeyMismatch},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := defaultConfig()
			cfg.DataDir, cfg.masterKey = tt.dir(t), tt.env
			key, err := openMasterKey(cfg, lg)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("openMasterKey = %v, want %v", err, tt.wantErr)
			}
			if err != nil {
				if _, statErr := os.Stat(filepath.Join(cfg.DataDir, "master.key")); statErr == nil {
					t.Error("a refused start wrote master.key")
				}
				return
			}
			fp, err := os.ReadFile(filepath.Join(cfg.DataDir, "master.key.id"))
			if err != nil {
				t.Fatal(err)
			}
			if err := checkFingerprint(fp, key); err != nil {
				t.Error(err)
			}
		})
	}
}
