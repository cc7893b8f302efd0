package main

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestMasterKeySource (issue 14): the master key can live outside the
// data dir (GATEHOUSE_MASTER_KEY, or master_key_file); only without either
// is it generated inside it.
func TestMasterKeySource(t *testing.T) {
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
