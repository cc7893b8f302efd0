package wal

import (
	"errors"
	"time"
)

// Config configures a Log.
type Config struct {
	// Path is the bbolt file, e.g. data/wal.db. Its directory must exist.
	Path string
	// MaxBatch is the most records merged into one commit. A single Append
	// larger than MaxBatch is still committed whole, alone.
	MaxBatch int
	// NoSync skips fsync on commit. Tests and benchmarks only.
	NoSync bool
	// OpenTimeout bounds the wait for bbolt's file lock.
	OpenTimeout time.Duration
}

// DefaultConfig returns the production defaults; Path is left empty.
func DefaultConfig() Config {
	return Config{
		MaxBatch:    4096,
		OpenTimeout: time.Second,
	}
}

// Validate reports the first invalid field; the message names the field.
func (c Config) Validate() error {
	switch {
	case c.Path == "":
		return errors.New("wal: path must not be empty")
	case c.MaxBatch <= 0:
		return errors.New("wal: max_batch must be > 0")
	case c.OpenTimeout <= 0:
		return errors.New("wal: open_timeout must be > 0")
	}
	return nil
}
