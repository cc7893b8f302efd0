package actors

import (
	"errors"
	"time"
)

// Config tunes the actor system. Every field has a default in DefaultConfig.
type Config struct {
	// Shards is the number of key shard actors (fixed for the life of the data dir is best:
	// ids are chosen so a key's id and its first secret hash land on the same shard).
	Shards int
	// FlushInterval bounds how long usage and rate-limit deltas stay only in memory.
	FlushInterval time.Duration
	// IdleAfter is how long a key actor may go without traffic before it is passivated.
	IdleAfter time.Duration
	// SweepInterval is how often shards look for idle key actors.
	SweepInterval time.Duration
	// GracePeriod is how long a rotated-out secret stays valid.
	GracePeriod time.Duration
	// SnapshotEvery takes a snapshot after this many WAL records (0 disables the count trigger).
	SnapshotEvery uint64
	// SnapshotInterval takes a snapshot at least this often when anything changed (0 disables).
	SnapshotInterval time.Duration
	// AuthTimeout bounds an Authorize/Validate wait (between 1 and 2 times it).
	AuthTimeout time.Duration
}

// DefaultConfig returns the defaults documented in the README.
func DefaultConfig() Config {
	return Config{
		Shards:           64,
		FlushInterval:    time.Second,
		IdleAfter:        5 * time.Minute,
		SweepInterval:    time.Minute,
		GracePeriod:      24 * time.Hour,
		SnapshotEvery:    200_000,
		SnapshotInterval: 10 * time.Minute,
		AuthTimeout:      time.Second,
	}
}

// Validate reports the first invalid field.
func (c Config) Validate() error {
	switch {
	case c.Shards < 1 || c.Shards > 4096:
		return errors.New("actors: shards must be in 1..4096")
	case c.FlushInterval <= 0:
		return errors.New("actors: usage flush_interval must be > 0")
	case c.IdleAfter <= 0:
		return errors.New("actors: idle_after must be > 0")
	case c.SweepInterval <= 0:
		return errors.New("actors: sweep_interval must be > 0")
	case c.GracePeriod < 0:
		return errors.New("actors: keys.rotation_grace_period must be >= 0")
	case c.SnapshotInterval < 0:
		return errors.New("actors: snapshot interval must be >= 0")
	case c.AuthTimeout <= 0:
		return errors.New("actors: auth_timeout must be > 0")
	}
	return nil
}

// MaxRateLimit is the largest requests-per-hour figure a key accepts.
const MaxRateLimit = 1_000_000_000

// maxRateLimit is MaxRateLimit, as the keys' code names it.
const maxRateLimit = MaxRateLimit
