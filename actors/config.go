package actors

import (
	"errors"
	"time"
)

// Config tunes the engine. Every field has a default in DefaultConfig;
// each domain has its own (keys.Config, accounts.Config, ...).
type Config struct {
	// FlushInterval is the ticker's period: every Ticker extension ticks
	// this often (the keys flush usage and rate-limit deltas, so it bounds
	// how long they stay only in memory).
	FlushInterval time.Duration
	// SnapshotEvery takes a snapshot after this many WAL records (0 disables the count trigger).
	SnapshotEvery uint64
	// SnapshotInterval takes a snapshot at least this often when anything changed (0 disables).
	SnapshotInterval time.Duration
	// AuthTimeout is the watchdog's period (ExtensionEnv.Watchdog): a hot
	// path's wait is bounded between 1 and 2 times it.
	AuthTimeout time.Duration
}

// DefaultConfig returns the defaults documented in the README.
func DefaultConfig() Config {
	return Config{
		FlushInterval:    time.Second,
		SnapshotEvery:    200_000,
		SnapshotInterval: 10 * time.Minute,
		AuthTimeout:      time.Second,
	}
}

// Validate reports the first invalid field.
func (c Config) Validate() error {
	switch {
	case c.FlushInterval <= 0:
		return errors.New("actors: usage flush_interval must be > 0")
	case c.SnapshotInterval < 0:
		return errors.New("actors: snapshot interval must be >= 0")
	case c.AuthTimeout <= 0:
		return errors.New("actors: auth_timeout must be > 0")
	}
	return nil
}
