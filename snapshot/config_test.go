package snapshot

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
)

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		mutate  func(c *Config)
		wantErr string // "" for valid
	}{
		{name: "default", mutate: func(*Config) {}},
		{name: "retain one", mutate: func(c *Config) { c.Retain = 1 }},
		{name: "empty dir", mutate: func(c *Config) { c.Dir = "" }, wantErr: "snapshot: dir must not be empty"},
		{name: "retain zero", mutate: func(c *Config) { c.Retain = 0 }, wantErr: "snapshot: retain must be >= 1"},
		{name: "retain negative", mutate: func(c *Config) { c.Retain = -3 }, wantErr: "snapshot: retain must be >= 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := DefaultConfig()
			tt.mutate(&c)
			err := c.Validate()
			got := ""
			if err != nil {
				got = err.Error()
			}
			if got != tt.wantErr {
				t.Errorf("Validate(%+v) = %q, want %q", c, got, tt.wantErr)
			}
		})
	}
}

func TestDefaultConfig(t *testing.T) {
	t.Parallel()
	if c := DefaultConfig(); c.Dir != "data/snap" || c.Retain != 3 {
		t.Errorf("DefaultConfig() = %+v, want Dir data/snap, Retain 3", c)
	}
}

func TestNewCreatesDir(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "data", "snap")
	if _, err := New(Config{Dir: dir, Retain: 1}, nil, nil); err != nil {
		t.Fatalf("New(%q) = %v", dir, err)
	}
	fi, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !fi.IsDir() || fi.Mode().Perm() != 0o700 {
		t.Errorf("New(%q) created mode %v, want a directory with 0700", dir, fi.Mode())
	}
}

func TestNewErrors(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := New(Config{Dir: file, Retain: 1}, nil, nil); err == nil {
		t.Errorf("New(dir is a file) = nil, want an error")
	}
	if _, err := New(Config{Dir: t.TempDir()}, nil, nil); err == nil {
		t.Errorf("New(Retain 0) = nil, want a validation error")
	}
}

func TestNewRegistersMetricsOnce(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewPedanticRegistry()
	if _, err := New(Config{Dir: t.TempDir(), Retain: 1}, nil, reg); err != nil {
		t.Fatalf("first New = %v", err)
	}
	if _, err := New(Config{Dir: t.TempDir(), Retain: 1}, nil, reg); err == nil {
		t.Errorf("second New on the same registry = nil, want an already-registered error")
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, mf := range mfs {
		names = append(names, mf.GetName())
	}
	want := []string{
		"gatehouse_snapshot_broken_total",
		"gatehouse_snapshot_load_duration_seconds",
		"gatehouse_snapshot_save_duration_seconds",
		"gatehouse_snapshot_size_bytes",
	}
	if diff := cmp.Diff(want, names); diff != "" {
		t.Errorf("registered metrics (-want +got):\n%s", diff)
	}
}
