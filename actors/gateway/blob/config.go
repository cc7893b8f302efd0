package blob

import "errors"

// Config tunes a Store. Every field has a default in DefaultConfig.
type Config struct {
	// Dir holds the blobs; New creates it (mode 0700) if missing. The
	// gateway uses <data-dir>/blobs.
	Dir string
	// NoSync skips every fsync. For tests and benchmarks only: without it
	// a blob is not durable when Put returns.
	NoSync bool
}

// DefaultConfig returns the defaults documented in the README.
func DefaultConfig() Config {
	return Config{Dir: "data/blobs"}
}

// Validate reports the first invalid field.
func (c Config) Validate() error {
	if c.Dir == "" {
		return errors.New("blob: dir must not be empty")
	}
	return nil
}
