package snapshot

import "errors"

// Config tunes a Store. Every field has a default in DefaultConfig.
type Config struct {
	// Dir holds the snapshot files; New creates it (mode 0700) if missing.
	Dir string
	// Retain is how many snapshots Save keeps, the newest ones; it must be >= 1.
	Retain int
}

// DefaultConfig returns the defaults documented in the README.
func DefaultConfig() Config {
	return Config{
		Dir:    "data/snap",
		Retain: 3,
	}
}

// Validate reports the first invalid field.
func (c Config) Validate() error {
	switch {
	case c.Dir == "":
		return errors.New("snapshot: dir must not be empty")
	case c.Retain < 1:
		return errors.New("snapshot: retain must be >= 1")
	}
	return nil
}
