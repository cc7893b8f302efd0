package main

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
)

// The data dir records which master key sealed it: master.key.id holds
//
//	gatehouse-master-key-id v1 <salt, 32 hex> <HMAC-SHA256, 64 hex>\n
//
// the HMAC being over fingerprintLabel followed by the salt, under the
// master key. It names the key without revealing it: no hash of the key
// itself, and the random salt makes a table precomputed for weak keys
// useless (a guessed key can be tested against it, as it can against any
// ciphertext in the WAL already). The file is written at the first start
// of an empty data dir and at the first start of a data dir from before
// fingerprints (which adopts the key it is given); from then on a start
// whose key does not match stops before anything is opened.
const (
	fingerprintFile    = "master.key.id"
	fingerprintVersion = "gatehouse-master-key-id v1"
	fingerprintLabel   = "gatehouse master key fingerprint v1\x00"
)

// Errors of the master key check, as the start reports them.
var (
	errMasterKeyMissing  = errors.New("master key missing")
	errMasterKeyMismatch = errors.New("master key does not match this data dir")
)

// keySource is where the master key came from, for the messages.
type keySource struct {
	desc    string // "GATEHOUSE_MASTER_KEY", "master_key_file /x", "/data/master.key"
	path    string // the file, if any
	present bool   // the file exists (always true for the environment)
}

// openMasterKey returns the master key for cfg.DataDir and checks it
// against the data dir's fingerprint:
//   - fingerprint present: the key must exist and match it, else the
//     start stops with a message saying what to restore or set;
//   - no fingerprint, data present (a data dir from before fingerprints):
//     the key it has is adopted and its fingerprint written; a missing
//     key stops the start, as the data was sealed under some key;
//   - empty data dir: <data_dir>/master.key is generated if no key is
//     configured, and the fingerprint written.
//
// The data dir must be locked.
func openMasterKey(cfg fileConfig, lg *slog.Logger) ([]byte, error) {
	src := masterKeySource(cfg)
	fpPath := filepath.Join(cfg.DataDir, fingerprintFile)
	fp, err := os.ReadFile(fpPath)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("master key: %w", err)
	}
	hasFP := err == nil
	hasData, err := dataDirInUse(cfg.DataDir)
	if err != nil {
		return nil, fmt.Errorf("master key: %w", err)
	}
	if !src.present && (hasFP || hasData) {
		what := "master.key.id records the key it was created with"
		if !hasFP {
			what = "it holds a WAL or snapshots sealed under a master key"
		}
		return nil, fmt.Errorf("%w: %s does not exist, but the data dir %s is not new (%s); "+
			"restore master.key from the backup of this data dir, or set GATEHOUSE_MASTER_KEY "+
			"(or master_key_file) to its key; a new key is generated only for an empty data dir",
			errMasterKeyMissing, src.path, cfg.DataDir, what)
	}
	key, err := loadMasterKey(cfg, lg)
	if err != nil {
		return nil, err
	}
	if hasFP {
		if err := checkFingerprint(fp, key); err != nil {
			return nil, fmt.Errorf("%w: the key from %s is not the key %s was created with (%s: %w); "+
				"set GATEHOUSE_MASTER_KEY (or master_key_file) to the right key, or restore master.key "+
				"from the backup of this data dir; nothing was changed",
				errMasterKeyMismatch, src.desc, cfg.DataDir, fpPath, err)
		}
		return key, nil
	}
	if err := writeFileAtomic(fpPath, newFingerprint(key)); err != nil {
		return nil, fmt.Errorf("master key: write fingerprint: %w", err)
	}
	if hasData {
		lg.Warn("adopted the master key of a data dir without a fingerprint", "source", src.desc, "path", fpPath)
	} else {
		lg.Info("recorded the master key fingerprint", "path", fpPath)
	}
	return key, nil
}

// masterKeySource says which key loadMasterKey will use, without reading it.
func masterKeySource(cfg fileConfig) keySource {
	switch {
	case cfg.masterKey != "":
		return keySource{desc: "GATEHOUSE_MASTER_KEY", present: true}
	case cfg.MasterKeyFile != "":
		_, err := os.Stat(cfg.MasterKeyFile)
		return keySource{desc: "master_key_file " + cfg.MasterKeyFile, path: cfg.MasterKeyFile, present: err == nil}
	}
	p := filepath.Join(cfg.DataDir, "master.key")
	_, err := os.Stat(p)
	return keySource{desc: p, path: p, present: err == nil}
}

// dataDirInUse reports whether dir holds a WAL or a snapshot: state that
// was sealed under some master key.
func dataDirInUse(dir string) (bool, error) {
	if _, err := os.Stat(filepath.Join(dir, "wal.db")); err == nil {
		return true, nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return false, err
	}
	ents, err := os.ReadDir(filepath.Join(dir, "snap"))
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	return len(ents) > 0, err
}

// fingerprintMAC is HMAC-SHA256(key, fingerprintLabel || salt).
func fingerprintMAC(key, salt []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(fingerprintLabel))
	m.Write(salt)
	return m.Sum(nil)
}

// newFingerprint is the content of master.key.id for key, with a fresh salt.
func newFingerprint(key []byte) []byte {
	salt := make([]byte, 16)
	_, _ = rand.Read(salt) // never fails (crypto/rand)
	return fmt.Appendf(nil, "%s %x %x\n", fingerprintVersion, salt, fingerprintMAC(key, salt))
}

// checkFingerprint reports whether b (a master.key.id) names key.
func checkFingerprint(b, key []byte) error {
	f := strings.Fields(string(b))
	if len(f) != 4 || strings.Join(f[:2], " ") != fingerprintVersion {
		return errors.New("unreadable fingerprint: want " + fingerprintVersion)
	}
	salt, err1 := hex.DecodeString(f[2])
	mac, err2 := hex.DecodeString(f[3])
	if err1 != nil || err2 != nil || len(mac) != sha256.Size {
		return errors.New("unreadable fingerprint")
	}
	if !hmac.Equal(mac, fingerprintMAC(key, salt)) {
		return errors.New("fingerprint differs")
	}
	return nil
}

// writeFileAtomic writes path through a synced temporary file renamed over
// it, then syncs the directory.
func writeFileAtomic(path string, b []byte) error {
	tmp := path + ".tmp"
	_ = os.Remove(tmp)
	if err := writeFileSync(tmp, b, 0o600); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return err
	}
	d, err := os.Open(filepath.Dir(path))
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// loadMasterKey takes the master key from GATEHOUSE_MASTER_KEY, else from
// master_key_file (which must exist), else from <data_dir>/master.key
// (generated if absent: openMasterKey lets that happen for an empty data
// dir only).
func loadMasterKey(cfg fileConfig, lg *slog.Logger) ([]byte, error) {
	switch {
	case cfg.masterKey != "":
		key, err := hex.DecodeString(strings.TrimSpace(cfg.masterKey))
		if err != nil || len(key) != 32 {
			return nil, errors.New("master key: GATEHOUSE_MASTER_KEY must be 64 hex characters")
		}
		lg.Info("master key from the environment")
		return key, nil
	case cfg.MasterKeyFile != "":
		if _, err := os.Stat(cfg.MasterKeyFile); err != nil {
			return nil, fmt.Errorf("master key: master_key_file: %w", err)
		}
		return masterKey(cfg.MasterKeyFile, lg)
	}
	return masterKey(filepath.Join(cfg.DataDir, "master.key"), lg)
}

// masterKey loads the AES-256 master key (64 hex characters) or creates it
// with mode 0600 on first start.
func masterKey(path string, lg *slog.Logger) ([]byte, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		key := make([]byte, 32)
		if _, err := rand.Read(key); err != nil {
			return nil, fmt.Errorf("master key: %w", err)
		}
		if err := writeFileSync(path, []byte(hex.EncodeToString(key)+"\n"), 0o600); err != nil {
			return nil, fmt.Errorf("master key: %w", err)
		}
		lg.Info("generated master key", "path", path)
		return key, nil
	}
	if err != nil {
		return nil, fmt.Errorf("master key: %w", err)
	}
	if fi, err := os.Stat(path); err == nil && fi.Mode().Perm()&0o077 != 0 {
		lg.Warn("master key file is readable by others", "path", path, "mode", fi.Mode().Perm().String())
	}
	key, err := hex.DecodeString(strings.TrimSpace(string(b)))
	if err != nil || len(key) != 32 {
		return nil, fmt.Errorf("master key %s: want 64 hex characters", path)
	}
	return key, nil
}
