package wal_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"gatehouse/wal"
)

func TestDefaultConfig(t *testing.T) {
	want := wal.Config{MaxBatch: 4096, OpenTimeout: time.Second}
	if diff := cmp.Diff(want, wal.DefaultConfig()); diff != "" {
		t.Errorf("DefaultConfig() mismatch (-want +got):\n%s", diff)
	}
}

func TestConfigValidate(t *testing.T) {
	valid := wal.DefaultConfig()
	valid.Path = "data/wal.db"
	tests := []struct {
		name    string
		edit    func(*wal.Config)
		wantErr string
	}{
		{name: "default with path", edit: func(*wal.Config) {}},
		{name: "no sync", edit: func(c *wal.Config) { c.NoSync = true }},
		{name: "max batch 1", edit: func(c *wal.Config) { c.MaxBatch = 1 }},
		{name: "empty path", edit: func(c *wal.Config) { c.Path = "" }, wantErr: "wal: path must not be empty"},
		{name: "zero max batch", edit: func(c *wal.Config) { c.MaxBatch = 0 }, wantErr: "wal: max_batch must be > 0"},
		{name: "negative max batch", edit: func(c *wal.Config) { c.MaxBatch = -1 }, wantErr: "wal: max_batch must be > 0"},
		{name: "zero open timeout", edit: func(c *wal.Config) { c.OpenTimeout = 0 }, wantErr: "wal: open_timeout must be > 0"},
		{name: "negative open timeout", edit: func(c *wal.Config) { c.OpenTimeout = -time.Second }, wantErr: "wal: open_timeout must be > 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := valid
			tt.edit(&cfg)
			err := cfg.Validate()
			var got string
			if err != nil {
				got = err.Error()
			}
			if got != tt.wantErr {
				t.Errorf("Validate() = %q, want %q", got, tt.wantErr)
			}
		})
	}
}
