package keys

import (
	"errors"
	"time"
)

// Config tunes the keys. Every field has a default in DefaultConfig.
type Config struct {
	// Shards is the number of key shard actors (fixed for the life of the data dir is best:
	// ids are chosen so a key's id and its first secret hash land on the same shard).
	Shards int
	// IdleAfter is how long a key actor may go without traffic before it is passivated.
	IdleAfter time.Duration
	// SweepInterval is how often shards look for idle key actors.
	SweepInterval time.Duration
	// GracePeriod is how long a rotated-out secret stays valid.
	GracePeriod time.Duration
}

// DefaultConfig returns the defaults documented in the README.
func DefaultConfig() Config {
	return Config{
		Shards:        64,
		IdleAfter:     5 * time.Minute,
		SweepInterval: time.Minute,
		GracePeriod:   24 * time.Hour,
	}
}

// Validate reports the first invalid field.
func (c Config) Validate() error {
	switch {
	case c.Shards < 1 || c.Shards > 4096:
		return errors.New("keys: shards must be in 1..4096")
	case c.IdleAfter <= 0:
		return errors.New("keys: idle_after must be > 0")
	case c.SweepInterval <= 0:
		return errors.New("keys: sweep_interval must be > 0")
	case c.GracePeriod < 0:
		return errors.New("keys: rotation_grace_period must be >= 0")
	}
	return nil
}

// MaxRateLimit is the largest requests-per-hour figure a key accepts.
const MaxRateLimit = 1_000_000_000

// maxRateLimit is MaxRateLimit, as the keys' code names it.
const maxRateLimit = MaxRateLimit
